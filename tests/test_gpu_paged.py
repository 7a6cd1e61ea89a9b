"""The paged cache on a GPU: the Triton kernels against the reference in bf16, one graph per
capture size replayed bit for bit as the same paged step run eagerly at every length, and
the paged engine's tokens with graphs equal to its tokens without. Marked cuda: skipped
where torch sees no GPU (conftest.py)."""

import random

import numpy as np
import pytest
import torch

from tinyllm import GraphDecoder, PagedEngine, kernels, load_pretrained, projections
from tinyllm.rows import Download, Upload

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu_model():
    return load_pretrained("cuda")


@pytest.mark.parametrize("lens", [[1, 16, 17, 200], [1023, 1024, 5, 64]], ids=["short", "long"])
@pytest.mark.parametrize("heads", [(8, 4), (8, 2), (4, 4)], ids=lambda h: f"{h[0]}q{h[1]}kv")
def test_the_triton_kernels_compute_the_reference_in_bf16(lens, heads):
    H, H_kv = heads
    g = torch.Generator(device="cuda").manual_seed(0)
    B, D, block, per_row = len(lens), 32, 16, 64
    n_blocks = B * per_row + 1
    k, v = (torch.randn(n_blocks, H_kv, block, D, device="cuda", generator=g,
                        dtype=torch.bfloat16) for _ in "kv")  # fmt: skip
    table = (torch.randperm(n_blocks - 1, device="cuda", generator=g) + 1)[: B * per_row]
    table = table.view(B, per_row).int()
    q = torch.randn(B, H, D, device="cuda", generator=g, dtype=torch.bfloat16)
    lens_t = torch.tensor(lens, device="cuda", dtype=torch.int32)
    out = kernels.paged_decode_attention(q, k, v, table, lens_t)
    ref = kernels.reference_paged_decode_attention(q, k, v, table, lens_t)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    assert (out.float() - ref.float()).abs().max() <= 2e-2 * ref.float().abs().max()


@pytest.mark.parametrize("lens", [[0, 15, 16, 199], [1022, 1023, 4, 63]], ids=["short", "long"])
@pytest.mark.parametrize("n_splits", [1, 16, 64])
def test_the_fused_kernel_computes_the_reference_in_bf16(lens, n_splits):
    """RoPE, the write and the attention against the reference, in its three forms: a table of
    64 blocks in one split on tensor cores a few blocks a pass, in 16 splits on tensor cores a
    share a pass, in 64 splits as sums of products."""
    g = torch.Generator(device="cuda").manual_seed(0)
    H, H_kv, B, D, block, per_row = 8, 4, len(lens), 32, 16, 64
    k, v = (torch.randn(B * per_row + 1, H_kv, block, D, device="cuda", generator=g,
                        dtype=torch.bfloat16) for _ in "kv")  # fmt: skip
    table = (torch.randperm(B * per_row, device="cuda", generator=g) + 1).view(B, per_row).int()
    qkv = torch.randn(B, H + 2 * H_kv, D, device="cuda", generator=g, dtype=torch.bfloat16)
    angle = torch.rand(1024, D // 2, device="cuda", generator=g) * 6
    cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
    lens_t = torch.tensor(lens, device="cuda", dtype=torch.int32)
    assert kernels.tensor_cores(per_row, n_splits) == (n_splits < 64)
    ref_k, ref_v = k.clone(), v.clone()
    ref = kernels.reference_rope_write_attend(qkv, cos, sin, ref_k, ref_v, table, lens_t).float()
    out = kernels.triton_rope_write_attend(qkv, cos, sin, k, v, table, lens_t, n_splits=n_splits)
    assert out.dtype == torch.bfloat16 and out.shape == (B, H, D)
    assert (out.float() - ref).abs().max() <= 2e-2 * ref.abs().max()
    assert (k.float() - ref_k.float()).abs().max() <= 2e-2 * ref_k.float().abs().max()
    assert torch.equal(v, ref_v)


@pytest.mark.parametrize("rows", [1, 8, 40])
def test_the_projection_kernels_compute_their_references_in_bf16(rows):
    """One row, a tile of rows (tl.dot), and three tiles, at the model's widths; the
    attention's splits combined in the output projection: up to FOLD_ROWS rows, each row by
    its own programs, past it by the combine kernel first."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x, res = (torch.randn(rows, n, device="cuda", generator=g).bfloat16() for n in (256, 768))
    norm_w = torch.randn(256, device="cuda", generator=g).bfloat16()
    w13 = (torch.randn(1536, 256, device="cuda", generator=g) * 0.05).bfloat16()
    w2 = (torch.randn(256, 768, device="cuda", generator=g) * 0.05).bfloat16()
    pairs = (
        (projections.norm_project(x, norm_w, w13, 1e-5),
         projections.reference_norm_project(x, norm_w, w13, 1e-5)),
        (projections.norm_swiglu(x, norm_w, w13, 1e-5),
         projections.reference_norm_swiglu(x, norm_w, w13, 1e-5)),
        (projections.project_add(res, w2, x), projections.reference_project_add(res, w2, x)),
    )  # fmt: skip
    part = torch.randn(rows, 8, 16, 32, device="cuda", generator=g)  # the attention's splits
    m, w_sum = torch.randn(rows, 8, 16, device="cuda", generator=g), part.new_ones(rows, 8, 16)
    m[:, :, -1], w_sum[:, :, -1] = float("-inf"), 0.0  # a split with no keys
    wo = w2[:, :256].contiguous()
    folded = projections.combine_project_add(part, m, w_sum, wo, x)
    pairs += ((folded, projections.reference_combine_project_add(part, m, w_sum, wo, x)),)
    for got, want in pairs:
        assert got.dtype == torch.bfloat16 and got.shape == want.shape
        assert (got.float() - want.float()).abs().max() <= 2e-2 * want.float().abs().max()
    if rows <= projections.FOLD_ROWS:  # each row combined by its own programs
        last = projections.combine_project_add(part[-1:], m[-1:], w_sum[-1:], wo, x[-1:])
        assert torch.equal(folded[-1:], last)


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_one_graph_replays_the_eager_paged_step_at_every_length(gpu_model, doc_ids, batch):
    """Captured once, after a 37-token prefill; replayed across block boundaries there and,
    after a 900-token prefill, at 900 keys and on: torch.equal with the eager paged step."""
    graph = GraphDecoder(gpu_model, batch, kv="paged")
    eager = GraphDecoder(gpu_model, batch, kv="paged", use_graph=False)
    for T, steps in ((37, 40), (900, 40)):
        idx = torch.tensor([doc_ids[s : s + T] for s in range(0, 997 * batch, 997)], device="cuda")
        tok = eager.prefill(idx)[:, -1:].argmax(-1)
        assert torch.equal(graph.prefill(idx)[:, -1:].argmax(-1), tok)
        for i in range(steps):
            a, b = graph.step(tok), eager.step(tok)
            assert torch.equal(a, b), f"prompt {T}, step {i}"
            tok = b[:, -1].argmax(-1, keepdim=True)
    assert list(graph.graphs) == [batch]  # the one graph, captured at the first step


def test_the_paged_engine_gives_the_same_tokens_eager_replayed_and_overlapped(gpu_model, doc_ids):
    """Greedy and seeded requests, with an eos: eager, with graphs, and with graphs and the
    host overlapped, the same tokens (overlap changes when the host works, not what runs)."""
    rng = random.Random(5)
    reqs = [(doc_ids[s : s + rng.randint(1, 60)], rng.randint(1, 40),
             {"temperature": 0.9, "top_k": 40, "seed": s} if s % 3 == 0 else {})
            for s in rng.sample(range(len(doc_ids) - 80), 40)]  # fmt: skip
    outs = []
    for use_graph, overlap in ((False, False), (True, False), (True, True)):
        engine = PagedEngine(gpu_model, 8, max_len=256, use_graph=use_graph,
                             eos_id=ord("."), overlap=overlap)  # fmt: skip
        rids = [engine.submit(p, n, **kw) for p, n, kw in reqs]
        out = engine.run()
        outs.append([out[r] for r in rids])
        for (_, n, _), toks in zip(reqs, outs[-1]):
            assert len(toks) == n or (toks[-1] == ord(".") and len(toks) < n)
        engine.rows.flush()
        assert engine.rows.lens.tolist() == engine.rows.lens_dev.tolist()
    assert outs[0] == outs[1] == outs[2]
    assert sorted(engine.decode_graphs) == [1, 2, 4, 8]


def test_capture_makes_every_graph_before_serving_in_one_pool(gpu_model, doc_ids):
    engine = PagedEngine(gpu_model, 32, max_len=512)
    seconds = engine.capture()
    assert sorted(engine.decode_graphs) == [1, 2, 4, 8, 16, 24, 32] and seconds > 0
    assert len(engine.fill_graphs) == 6 * 6  # rows 1..32 by positions 16..512
    assert engine.fill_graphs.pool is engine.decode_graphs.pool
    graphs = {k: id(v[0]) for g in (engine.decode_graphs, engine.fill_graphs)
              for k, v in g.graphs.items()}  # fmt: skip
    rng = random.Random(1)
    for s in rng.sample(range(len(doc_ids) - 80), 40):
        engine.submit(doc_ids[s : s + rng.randint(1, 60)], rng.randint(1, 40))
    engine.run()
    assert {k: id(v[0]) for g in (engine.decode_graphs, engine.fill_graphs)
            for k, v in g.graphs.items()} == graphs  # fmt: skip


def test_uploads_and_downloads_through_reused_pinned_buffers_lose_no_value():
    """Ten uploads, then ten downloads, each batch queued behind a long kernel: each pinned
    buffer is used again while copies are pending, and every copy carries its own values. A
    download is read before four more have started, as a step reads its ids (Download)."""
    dst = torch.zeros(64, dtype=torch.long, device="cuda")
    upload, download = Upload(dst), Download(64, torch.device("cuda"))
    landed = []
    torch.cuda._sleep(50_000_000)  # the GPU busy: the copies below wait behind it
    for i in range(10):
        values = np.full(8 * (i % 4 + 1), 100 + i, np.int64)
        upload(values)
        values[:] = -1  # the host's array changed at once: the copy must not see it
        landed.append(dst[: 8 * (i % 4 + 1)].clone())
    torch.cuda.synchronize()
    assert [got.tolist() for got in landed] == [[100 + i] * (8 * (i % 4 + 1)) for i in range(10)]
    torch.cuda._sleep(50_000_000)
    pending = []
    for i in range(10):
        pending.append((i, *download(dst[:8] * 2 + i)))
        if len(pending) == 3 or i == 9:  # read before the buffer comes round again
            for j, ids, copied in pending:
                copied.synchronize()
                assert ids.tolist() == [2 * 109 + j] * 8, j  # dst[:8] holds the last upload's
            pending = []


def test_the_sampler_kernel_draws_the_reference_ids():
    """The one-kernel sampler against the reference's seventy-odd ops, on the GPU: the same
    ids for greedy rows, drawn rows, every top-k, seeds at both ends, bf16 and float32."""
    from tinyllm.generation import reference_sample, sample

    g = torch.Generator(device="cuda").manual_seed(0)
    for dtype in (torch.bfloat16, torch.float32):
        for B in (1, 7, 256):
            logits = (torch.randn(B, 258, device="cuda", generator=g) * 3).to(dtype)
            t = torch.rand(B, device="cuda", generator=g, dtype=torch.float64) * 2
            t[::3] = 0.0
            top_k = torch.randint(0, 270, (B,), device="cuda", generator=g)
            seed = torch.randint(0, 2**62, (B,), device="cuda", generator=g)
            seed[0] = 2**63 - 1
            position = torch.randint(0, 1024, (B,), device="cuda", generator=g)
            got = sample(logits, t, top_k, seed, position)
            assert torch.equal(got, reference_sample(logits, t, top_k, seed, position))
