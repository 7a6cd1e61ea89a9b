"""CUDA-graph replay on a GPU: bit for bit the static step it recorded.

Every test here is marked `cuda` and skipped where torch sees no GPU (conftest.py).

The reference for a replayed graph is the same static step run eagerly (use_graph=False)
on a twin decoder: the same kernels on the same inputs, so the logits must be
torch.equal, not merely close. Both twins are fed the same tokens (the reference's
greedy choice), so one difference cannot snowball into others. Eager generate() is not
compared here: it attends over a different number of keys with a different SDPA kernel
and agrees only to bf16 rounding (notebook 05 measures by how much).
"""

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyllm import Engine, GraphDecoder, SlotGraphDecoder, SlotKVCache, generate, load_pretrained
from tinyllm.generation import left_pad, prefill

pytestmark = pytest.mark.cuda

DEVICE = "cuda"


@pytest.fixture(scope="module")
def gpu_model():
    model = load_pretrained(device=DEVICE)
    assert next(model.parameters()).is_cuda
    return model


def prompts(doc_ids, batch, T, padded, start=0, device=DEVICE):
    """batch rows of real text, T tokens wide; padded: row b is shorter by (7 b) mod T."""
    rows = [doc_ids[start + 997 * b : start + 997 * b + T] for b in range(batch)]
    if not padded:
        return torch.tensor(rows, device=device), None
    rows = [r[(7 * b) % T :] for b, r in enumerate(rows)]
    return left_pad(rows, pad_id=257, device=device)


def describe(a, b):
    diff = (a.float() - b.float()).abs()
    return f"max |diff| {diff.max().item():.3g} in {int((diff > 0).sum())} of {diff.numel()} logits"


def lockstep(graph, eager, idx, pad_lens, steps, label=""):
    """Prefill both decoders, then step both with the same tokens and require equal
    logits at every step. Returns the windows the steps used."""
    lg, le = graph.prefill(idx, pad_lens), eager.prefill(idx, pad_lens)
    assert torch.equal(lg, le), f"{label} prefill: " + describe(lg, le)
    tok = le[:, -1:].argmax(-1)
    windows = []
    for i in range(steps):
        windows.append(eager.graph_key())
        g = graph.step(tok)
        e = eager.step(tok)
        if not torch.equal(g, e):
            pytest.fail(
                f"{label} step {i} (position {eager.cache.n - 1}, window {windows[-1]}): "
                + describe(g, e)
            )
        tok = e[:, -1:].argmax(-1)
    assert graph.cache.n == eager.cache.n
    assert torch.equal(graph.cache.pos, eager.cache.pos)
    assert int(graph.cache.pos) == graph.cache.n
    return windows


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("batch", [1, 4, 16])
def test_replay_equals_the_static_step_through_every_bucket(gpu_model, doc_ids, batch, padded):
    graph = GraphDecoder(gpu_model, batch, use_graph=True)  # max_len 1024, buckets 128..1024
    eager = GraphDecoder(gpu_model, batch, use_graph=False)
    assert graph.buckets == (128, 256, 512, 1024)
    # first request: prompt 32, then every position up to the end of the cache
    idx, pad_lens = prompts(doc_ids, batch, 32, padded)
    windows = lockstep(graph, eager, idx, pad_lens, 1024 - 32, "request 1")
    assert sorted(set(windows)) == [128, 256, 512, 1024]
    assert sorted(graph.graphs) == [128, 256, 512, 1024]  # captured lazily, once each
    assert graph.cache.n == 1024
    # second request on the same decoders (graphs reused, cache reset by prefill)
    graphs_before = dict(graph.graphs)
    idx, pad_lens = prompts(doc_ids, batch, 100, padded, start=50_000)
    windows = lockstep(graph, eager, idx, pad_lens, 300, "request 2")
    assert sorted(set(windows)) == [128, 256, 512]
    assert graph.graphs == graphs_before  # no new capture


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
def test_graph_generate_equals_static_generate(gpu_model, doc_ids, padded):
    idx, pad_lens = prompts(doc_ids, 4, 40, padded)
    graph = GraphDecoder(gpu_model, 4, max_len=512, use_graph=True)
    eager = GraphDecoder(gpu_model, 4, max_len=512, use_graph=False)
    for kw in ({}, {"temperature": 0.9, "top_k": 40, "seed": 3}, {"eos_id": ord("e")}):
        a = graph.generate(idx, 400, pad_lens=pad_lens, **kw)
        b = eager.generate(idx, 400, pad_lens=pad_lens, **kw)
        assert torch.equal(a, b), kw


def check_slots_agree(a, b, where):
    assert a.lens == a.lens_dev.tolist(), f"{where}: graph slots host {a.lens} != device"
    assert b.lens == b.lens_dev.tolist(), f"{where}: eager slots host {b.lens} != device"
    assert a.lens == b.lens and a.active == b.active, where


def test_slot_replay_equals_the_eager_slot_step(gpu_model, doc_ids):
    """Two slot caches, one decoded by replay, one eagerly, with the same admissions and
    releases mid-stream; logits equal at every step, lengths equal on host and device."""
    n_slots, max_len = 8, 512
    cfg = gpu_model.cfg
    A = SlotKVCache(cfg.n_layers, n_slots, max_len, DEVICE)
    B = SlotKVCache(cfg.n_layers, n_slots, max_len, DEVICE)
    graph = SlotGraphDecoder(gpu_model, A, use_graph=True)
    eager = SlotGraphDecoder(gpu_model, B, use_graph=False)
    assert graph.buckets == (128, 256, 512)
    rng, text_rng = random.Random(0), random.Random(1)
    queue = [(rng.randint(1, 200), rng.randint(1, 300)) for _ in range(24)]
    queue += [(200, 300), (1, 400)]  # two long ones: the widest window is needed
    running = {}  # slot → [last token, steps left]
    steps, windows = 0, set()
    while queue or running:
        free = A.free_slots()
        assert free == B.free_slots()
        if queue and free and (steps % 3 == 0 or not running):  # staggered admissions
            T, n = queue.pop()
            slot = free[rng.randrange(len(free))]
            start = text_rng.randrange(len(doc_ids) - T)
            idx = torch.tensor([doc_ids[start : start + T]], device=DEVICE)
            la = prefill(gpu_model, idx, A.prefilling(slot))
            lb = prefill(gpu_model, idx, B.prefilling(slot))
            assert torch.equal(la, lb)
            running[slot] = [int(lb[0, -1].argmax()), n]
            check_slots_agree(A, B, f"admission at step {steps}")
        if steps == 40:
            graph.capture()  # ahead-of-time capture between steps is safe
            check_slots_agree(A, B, "after capture()")
        tok = torch.zeros(n_slots, 1, dtype=torch.long, device=DEVICE)
        for s, (last, _) in running.items():
            tok[s, 0] = last
        windows.add(eager.graph_key())
        g = graph.step(tok)
        e = eager.step(tok)
        if not torch.equal(g, e):
            pytest.fail(f"step {steps}, lens {B.lens}: " + describe(g, e))
        steps += 1
        check_slots_agree(A, B, f"step {steps}")
        greedy = e[:, -1].argmax(-1).tolist()
        for s in list(running):
            running[s] = [greedy[s], running[s][1] - 1]
            if running[s][1] == 0:
                A.release(s)
                B.release(s)
                del running[s]
                check_slots_agree(A, B, f"release at step {steps}")
    assert windows == {128, 256, 512}
    assert sorted(graph.graphs) == [128, 256, 512]
    assert A.lens == [0] * n_slots


def test_engine_with_graphs_equals_engine_without(gpu_model, doc_ids):
    rng = random.Random(2)
    reqs = []
    for _ in range(60):
        T = rng.randint(1, 60)
        start = rng.randrange(len(doc_ids) - T)
        reqs.append((doc_ids[start : start + T], rng.randint(1, 60)))
    results, stats = [], []
    for use_graph in (None, False):  # None: graphs, since the model is on CUDA
        engine = Engine(gpu_model, n_slots=8, max_len=256, use_graph=use_graph, eos_id=ord("e"))
        assert engine.use_graph is (use_graph is None)
        rids = [engine.submit(p, n) for p, n in reqs]
        rids.append(engine.submit(reqs[0][0], 30, temperature=1.0, top_k=50, seed=11))
        results.append(engine.run())
        assert sorted(results[-1]) == rids
        assert engine.slots.lens == engine.slots.lens_dev.tolist()
        stats.append([(s["window"], s["slots"], s["n_active"]) for s in engine.stats])
    assert results[0] == results[1]
    assert stats[0] == stats[1]


def test_capture_makes_one_graph_per_bucket_in_one_pool(gpu_model, doc_ids):
    idx, _ = prompts(doc_ids, 4, 50, False)
    dec = GraphDecoder(gpu_model, 4, use_graph=True)
    twin = GraphDecoder(gpu_model, 4, use_graph=False)
    assert dec.pool is None and dec.graphs == {}  # nothing before a capture
    dec.prefill(idx)
    twin.prefill(idx)
    pos = dec.cache.pos.clone()
    seconds = dec.capture()
    assert isinstance(seconds, float) and seconds > 0
    assert sorted(dec.graphs) == list(dec.buckets) == [128, 256, 512, 1024]
    pool = dec.pool
    assert pool is not None
    assert all(g.pool() == pool for g, _ in dec.graphs.values())  # one shared pool
    outs = [out for _, out in dec.graphs.values()]
    assert all(o.shape == (4, 1, gpu_model.cfg.vocab_size) for o in outs)
    # capturing moved nothing: the position is the prefill's, on host and device
    assert dec.cache.n == 50 and torch.equal(dec.cache.pos, pos)
    # capturing again captures nothing new
    assert dec.capture() >= 0 and dec.graphs.keys() == {128, 256, 512, 1024}
    # and the captured graphs decode exactly like the eager static step
    tok = idx[:, -1:]
    for _ in range(3):
        g, e = dec.step(tok), twin.step(tok)
        assert torch.equal(g, e)
        tok = e[:, -1:].argmax(-1)
    assert dec.graphs.keys() == {128, 256, 512, 1024}


def test_a_window_captured_alone_is_kept_and_the_pool_takes_more(gpu_model, doc_ids):
    """capture_graph's result thrown away (as notebook 04 does): the decoder keeps the graph,
    so the shared pool stays in use and the later captures into it succeed (with the graph
    freed, PyTorch's caching allocator asserts on the next capture into the pool)."""
    idx, _ = prompts(doc_ids, 1, 20, False)
    dec = GraphDecoder(gpu_model, 1, buckets=(32, 64, 1024))
    twin = GraphDecoder(gpu_model, 1, buckets=(32, 64, 1024), use_graph=False)
    dec.prefill(idx)
    twin.prefill(idx)
    dec.capture_graph(32)
    assert list(dec.graphs) == [32]
    dec.capture()
    assert sorted(dec.graphs) == [32, 64, 1024]
    assert all(g.pool() == dec.pool for g, _ in dec.graphs.values())
    tok = idx[:, -1:]
    for _ in range(16):  # through the 32-key window into the 64-key one
        g, e = dec.step(tok), twin.step(tok)
        assert torch.equal(g, e)
        tok = e[:, -1:].argmax(-1)


def test_slot_capture_makes_one_graph_per_bucket_in_one_pool(gpu_model):
    slots = SlotKVCache(gpu_model.cfg.n_layers, 4, 1000, DEVICE)
    dec = SlotGraphDecoder(gpu_model, slots, use_graph=True)
    assert dec.pool is None
    prefill(gpu_model, torch.arange(7, device=DEVICE)[None], slots.prefilling(2))
    lens, lens_dev = list(slots.lens), slots.lens_dev.clone()
    seconds = dec.capture((256, 1000))
    assert isinstance(seconds, float) and seconds > 0
    assert sorted(dec.graphs) == [256, 1000]
    seconds = dec.capture()
    assert sorted(dec.graphs) == list(dec.buckets) == [128, 256, 512, 1000]
    assert all(g.pool() == dec.pool for g, _ in dec.graphs.values())
    assert slots.lens == lens and torch.equal(slots.lens_dev, lens_dev)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([[5], [258]], r"tok holds token id 258, outside the vocabulary \[0, 258\)"),
        ([[-1], [5]], r"tok holds token id -1, outside the vocabulary \[0, 258\)"),
        ([[2**40], [5]], r"tok holds token id 1099511627776, outside the vocabulary"),
    ],
)
def test_a_bad_token_raises_and_the_device_still_works(gpu_model, doc_ids, bad, message):
    idx, _ = prompts(doc_ids, 2, 20, False)
    dec = GraphDecoder(gpu_model, 2, max_len=256, buckets=(128, 256), use_graph=True)
    twin = GraphDecoder(gpu_model, 2, max_len=256, buckets=(128, 256), use_graph=False)
    dec.prefill(idx)
    tok = twin.prefill(idx)[:, -1:].argmax(-1)
    assert torch.equal(dec.step(tok), twin.step(tok))
    with pytest.raises(ValueError, match=message):
        dec.step(torch.tensor(bad, device=DEVICE))
    with pytest.raises(ValueError, match=r"tok is on cpu, the model on cuda"):
        dec.step(torch.tensor([[5], [5]]))
    torch.cuda.synchronize()  # no device-side assert is pending
    assert dec.cache.n == twin.cache.n == 21
    for _ in range(5):  # later valid steps succeed, and still match the eager twin
        g, e = dec.step(tok), twin.step(tok)
        assert torch.equal(g, e)
        tok = e[:, -1:].argmax(-1)
    torch.cuda.synchronize()

    # the slot decoder and generate() guard the device the same way
    slots = SlotKVCache(gpu_model.cfg.n_layers, 2, 256, DEVICE)
    sdec = SlotGraphDecoder(gpu_model, slots, buckets=(128, 256), use_graph=True)
    prefill(gpu_model, idx[:1], slots.prefilling(0))
    with pytest.raises(ValueError, match=message):
        sdec.step(torch.tensor(bad, device=DEVICE))
    assert slots.lens == slots.lens_dev.tolist() == [20, 0]
    sdec.step(torch.tensor([[5], [0]], device=DEVICE))
    assert slots.lens == slots.lens_dev.tolist() == [21, 0]
    bad_prompt = idx.clone()
    bad_prompt[1, 3] = bad[0][0] if bad[0][0] != 5 else bad[1][0]
    with pytest.raises(ValueError, match=r"idx holds token id"):
        generate(gpu_model, bad_prompt, 5)
    assert generate(gpu_model, idx, 5).shape == (2, 5)
    torch.cuda.synchronize()


# --- a property: any batch, pads, prompt length and number of steps -----------------------

PROP_MAX_LEN, PROP_BUCKETS = 256, (32, 64, 128, 256)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_replay_equals_the_static_step_for_any_shape(gpu_model, data):
    batch = data.draw(st.integers(1, 8), label="batch")
    T = data.draw(st.integers(1, 120), label="prompt length")
    padded = data.draw(st.booleans(), label="padded")
    pads = (
        data.draw(st.lists(st.integers(0, T - 1), min_size=batch, max_size=batch), label="pad_lens")
        if padded
        else None
    )
    steps = data.draw(st.integers(1, PROP_MAX_LEN - T), label="steps")
    seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, 256, (batch, T), generator=gen)
    pad_lens = None
    if padded:
        pad_lens = torch.tensor(pads)
        for b, p in enumerate(pads):
            idx[b, :p] = 257
        pad_lens = pad_lens.to(DEVICE)
    idx = idx.to(DEVICE)
    graph = GraphDecoder(
        gpu_model, batch, max_len=PROP_MAX_LEN, buckets=PROP_BUCKETS, use_graph=True
    )
    eager = GraphDecoder(
        gpu_model, batch, max_len=PROP_MAX_LEN, buckets=PROP_BUCKETS, use_graph=False
    )
    windows = lockstep(graph, eager, idx, pad_lens, steps, f"batch {batch}, T {T}, pads {pads}")
    assert sorted(graph.graphs) == sorted(set(windows))
