"""The static-shape decode step on the CPU (use_graph=False), and the bucket rules.

use_graph=False runs exactly the step that a CUDA graph records, so its agreement with
eager generate() is checked here, on any machine; tests/test_gpu.py checks that replay
equals it bit for bit.

Tolerance. In fp32 the static step and eager decode_step differ only in how attention
is summed: the static step attends over a whole bucket window with a mask (the masked
keys get weight exactly 0), eager attends over exactly pos + 1 keys, and SDPA orders
its sums differently for the two shapes. The shipped model's logits reach about 20 in
size, and after 120 steps the two agree to ~1e-5 (about 5e-7 relative); we allow 1e-4.
Greedy tokens are equal: on real text the top-2 margin is far larger than that.
"""

import pytest
import torch

from tinyllm import (
    Engine,
    GraphDecoder,
    PagedEngine,
    SlotGraphDecoder,
    SlotKVCache,
    default_buckets,
    generate,
)
from tinyllm.generation import decode_step, left_pad, prefill
from tinyllm.graphs import bucket_for
from tinyllm.kv_cache import KVCache
from tinyllm.lab import simgraph

BUCKETS = (48, 64, 96, 160)
MAX_LEN = 160
ATOL = 1e-4


@pytest.fixture(scope="module")
def prompts(doc_ids):
    """Four real-text prompts: all 40 tokens, or 40, 23, 31 and 7 (left-padded to 40)."""
    starts = (1000, 5000, 9000, 13000)
    same = torch.tensor([doc_ids[s : s + 40] for s in starts])
    ragged = left_pad([doc_ids[s : s + n] for s, n in zip(starts, (40, 23, 31, 7))], pad_id=257)
    return {"unpadded": (same, None), "padded": ragged}


def record_windows(dec):
    """Wrap the decoder's step runner to record the window of every decode step."""
    windows, replay = [], dec.replay

    def spy(window):
        windows.append(window)
        return replay(window)

    dec.replay = spy
    return windows


@pytest.mark.parametrize("kind", ["unpadded", "padded"])
def test_static_step_generates_the_eager_tokens(shipped_model, prompts, kind):
    idx, pad_lens = prompts[kind]
    assert idx.shape == (4, 40)
    dec = GraphDecoder(shipped_model, 4, max_len=MAX_LEN, buckets=BUCKETS, use_graph=False)
    windows = record_windows(dec)
    static = dec.generate(idx, 120, pad_lens=pad_lens)
    eager = generate(shipped_model, idx, 120, pad_lens=pad_lens)
    assert static.shape == eager.shape == (4, 120)
    for b in range(4):
        assert static[b].tolist() == eager[b].tolist(), f"row {b}"
    # positions 40..158 were decoded (the last token is sampled, never fed back): the
    # steps crossed the 48, 64 and 96 boundaries
    assert len(windows) == 119 and dec.cache.n == 159
    assert sorted(set(windows)) == [48, 64, 96, 160]
    assert windows == [bucket_for(40 + i + 1, BUCKETS) for i in range(119)]


def test_static_step_logits_match_eager_decode_step(shipped_model, prompts):
    idx, pad_lens = prompts["padded"]
    dec = GraphDecoder(shipped_model, 4, max_len=MAX_LEN, buckets=BUCKETS, use_graph=False)
    cache = KVCache(shipped_model.cfg.n_layers, pad_lens)
    eager, static = prefill(shipped_model, idx, cache), dec.prefill(idx, pad_lens)
    assert torch.equal(eager, static)  # prefill is the same eager computation
    tok = eager[:, -1:].argmax(-1)
    worst = 0.0
    for _ in range(119):
        eager, static = decode_step(shipped_model, cache, tok), dec.step(tok)
        assert static.shape == eager.shape == (4, 1, shipped_model.cfg.vocab_size)
        torch.testing.assert_close(static, eager, atol=ATOL, rtol=0)
        worst = max(worst, (static - eager).abs().max().item())
        tok = eager[:, -1:].argmax(-1)
    assert dec.cache.n == 159 and dec.graph_key() == 160
    assert worst > 0  # really different kernels, not the same computation twice


def test_one_decoder_serves_two_requests_in_a_row(toy_model, prompts, doc_ids):
    """Request B on a decoder that just served A equals B on a fresh decoder: prefill
    resets the position and the pads, and stale keys of A stay masked. Both decoders run
    the same model, bit for bit, so the toy one does: no trained weights needed."""
    a_idx, a_pads = prompts["padded"]
    b_idx = torch.tensor([doc_ids[s : s + 12] for s in (200, 300, 400, 500)])
    dec = GraphDecoder(toy_model, 4, max_len=MAX_LEN, buckets=BUCKETS, use_graph=False)
    first_a = dec.generate(a_idx, 100, pad_lens=a_pads)
    reused = dec.generate(b_idx, 70)
    fresh_dec = GraphDecoder(toy_model, 4, max_len=MAX_LEN, buckets=BUCKETS, use_graph=False)
    fresh = fresh_dec.generate(b_idx, 70)
    assert torch.equal(reused, fresh)
    assert dec.cache.n == fresh_dec.cache.n == 12 + 69
    assert torch.equal(dec.cache.first_valid, torch.zeros(4, dtype=torch.long))
    # logits too, bit for bit: the same computation on the same live keys
    l_reused, l_fresh = dec.prefill(b_idx), fresh_dec.prefill(b_idx)
    assert torch.equal(l_reused, l_fresh)
    tok = l_fresh[:, -1:].argmax(-1)
    for _ in range(40):
        x, y = dec.step(tok), fresh_dec.step(tok)
        assert torch.equal(x, y)
        tok = y[:, -1:].argmax(-1)
    # and A again gives A's tokens
    assert torch.equal(dec.generate(a_idx, 100, pad_lens=a_pads), first_a)


def test_static_step_returns_one_position_per_row(shipped_model):
    dec = GraphDecoder(shipped_model, 3, max_len=64, buckets=(32, 64), use_graph=False)
    assert dec.batch == 3 and dec.buckets == (32, 64)
    logits = dec.prefill(torch.randint(0, 256, (3, 10)))
    assert logits.shape == (3, 10, 258)
    out = dec.step(logits[:, -1:].argmax(-1))
    assert out.shape == (3, 1, 258)
    assert dec.cache.n == 11 and int(dec.cache.pos) == 11


# --- buckets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, want",
    [
        ((1024,), {}, (128, 256, 512, 1024)),
        ((1000,), {}, (128, 256, 512, 1000)),  # max_len not a power of two ends the list
        ((513,), {}, (128, 256, 512, 513)),
        ((100,), {}, (100,)),  # max_len below the first bucket
        ((128,), {}, (128,)),
        ((129,), {}, (128, 129)),
        ((1,), {}, (1,)),
        ((1024,), {"growth": 1.5}, (128, 192, 288, 432, 648, 972, 1024)),
        ((1024,), {"growth": 3}, (128, 384, 1024)),
        ((1024,), {"first": 64}, (64, 128, 256, 512, 1024)),
        ((1024,), {"first": 300, "growth": 2.5}, (300, 750, 1024)),
        ((133,), {"growth": 1.001}, (128, 129, 130, 131, 132, 133)),  # always grows by >= 1
    ],
)
def test_default_buckets(args, kwargs, want):
    got = default_buckets(*args, **kwargs)
    assert got == want
    assert list(got) == sorted(set(got)) and got[-1] == args[0]


def test_bucket_for_at_the_edges():
    buckets = default_buckets(1024)
    assert bucket_for(1, buckets) == 128
    assert bucket_for(128, buckets) == 128
    assert bucket_for(129, buckets) == 256
    assert bucket_for(256, buckets) == 256
    assert bucket_for(257, buckets) == 512
    assert bucket_for(1024, buckets) == 1024
    with pytest.raises(ValueError, match="1025 keys > largest bucket 1024"):
        bucket_for(1025, buckets)


def test_decoders_take_default_or_given_buckets(shipped_model):
    assert GraphDecoder(shipped_model, 1, use_graph=False).buckets == (128, 256, 512, 1024)
    assert GraphDecoder(shipped_model, 1, max_len=1000, use_graph=False).buckets == (
        128,
        256,
        512,
        1000,
    )
    assert GraphDecoder(shipped_model, 1, max_len=100, use_graph=False).buckets == (100,)
    # given buckets are sorted and deduplicated
    dec = GraphDecoder(shipped_model, 1, max_len=256, buckets=(256, 64, 64, 128), use_graph=False)
    assert dec.buckets == (64, 128, 256)
    slots = SlotKVCache(shipped_model.cfg.n_layers, 2, 1000, "cpu")
    assert SlotGraphDecoder(shipped_model, slots, use_graph=False).buckets == (128, 256, 512, 1000)
    with pytest.raises(ValueError, match=r"graph key 100 is not one of \(64, 128, 256\)"):
        dec.capture((100,))


def test_use_graph_false_never_creates_cuda_state(shipped_model, monkeypatch):
    """use_graph=False makes no CUDA-graph call at all: each one would raise here."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a CUDA-graph call with use_graph=False")

    for name in ("CUDAGraph", "graph", "graph_pool_handle", "Stream", "stream",
                 "current_stream", "synchronize"):  # fmt: skip
        monkeypatch.setattr(torch.cuda, name, forbidden)
    cuda_before = torch.cuda.is_initialized()
    dec = GraphDecoder(shipped_model, 2, max_len=128, buckets=(32, 128), use_graph=False)
    dec.generate(torch.randint(0, 256, (2, 5)), 60)
    assert dec.graphs.own_pool is None and len(dec.graphs) == 0

    engine = Engine(shipped_model, 2, max_len=64, use_graph=False, buckets=(16, 64))
    engine.submit([1, 2, 3], 30)
    engine.submit([4, 5], 20)
    engine.run()
    assert engine.decoder.graphs.own_pool is None and len(engine.decoder.graphs) == 0
    assert {s["window"] for s in engine.stats} == {16, 64}

    paged = PagedEngine(shipped_model, 2, max_len=64, use_graph=False)
    paged.submit([1, 2, 3], 30)
    paged.run()
    assert paged.decode_graphs.own_pool is None and len(paged.fill_graphs) == 0
    assert torch.cuda.is_initialized() == cuda_before


@pytest.mark.parametrize("use_graph", [False, True], ids=["eager", "simulated graph"])
def test_an_interrupted_step_puts_the_positions_back(shipped_model, use_graph, monkeypatch):
    """A Ctrl-C between the step's device work and the host's advance: the positions on host
    and device agree again, and the next steps give the logits of a decoder that was never
    interrupted. Host and device positions are compared after every step."""
    idx = torch.randint(0, 256, (2, 9))
    kw = {"max_len": 64, "buckets": (16, 64), "use_graph": use_graph, "graph_api": simgraph}
    dec, twin = GraphDecoder(shipped_model, 2, **kw), GraphDecoder(shipped_model, 2, **kw)
    tok = dec.prefill(idx)[:, -1:].argmax(-1)
    twin.prefill(idx)
    original = dec.cache.advance_host
    for step in range(12):
        if step in (3, 7):  # positions 12 and 16: the second crosses into the 64-key window
            monkeypatch.setattr(dec.cache, "advance_host", Fault(KeyboardInterrupt()))
            with pytest.raises(KeyboardInterrupt):
                dec.step(tok)
            monkeypatch.setattr(dec.cache, "advance_host", original)
            assert int(dec.cache.pos) == dec.cache.n == 9 + step
        a, b = dec.step(tok), twin.step(tok)
        assert torch.equal(a, b), step
        assert int(dec.cache.pos) == dec.cache.n == int(twin.cache.pos) == 10 + step
        tok = b[:, -1:].argmax(-1)


def test_an_interrupted_slot_step_puts_the_lengths_back(shipped_model, monkeypatch):
    slots = SlotKVCache(shipped_model.cfg.n_layers, 3, 64, "cpu")
    dec = SlotGraphDecoder(shipped_model, slots, buckets=(16, 64), use_graph=True,
                           graph_api=simgraph)  # fmt: skip
    for s, T in ((0, 5), (2, 12)):
        prefill(shipped_model, torch.randint(0, 256, (1, T)), slots.prefilling(s))
    tok = torch.tensor([[7], [0], [9]])
    monkeypatch.setattr(slots, "advance_host", Fault(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        dec.step(tok)
    assert slots.lens == slots.lens_dev.tolist() == [5, 0, 12]
    monkeypatch.undo()
    dec.step(tok)
    assert slots.lens == slots.lens_dev.tolist() == [6, 0, 13]


class Fault:
    def __init__(self, error):
        self.error = error

    def __call__(self, *args, **kwargs):
        raise self.error


BUILT_LATE = {  # a constructor, the cache it builds, and bad arguments for it
    "GraphDecoder, compile": (lambda m: GraphDecoder(m, 2, compile="yes"), "StaticKVCache"),
    "GraphDecoder, buckets": (lambda m: GraphDecoder(m, 2, buckets=(3, 2)), "StaticKVCache"),
    "GraphDecoder, paged": (lambda m: GraphDecoder(m, 2, kv="paged", use_graph="no"),
                            "PagedKVCache"),
    "Engine, compile": (lambda m: Engine(m, 2, use_graph=False, compile=1), "SlotKVCache"),
    "Engine, buckets": (lambda m: Engine(m, 2, use_graph=False, buckets=(0,)), "SlotKVCache"),
    "Engine, use_graph": (lambda m: Engine(m, 2, use_graph=True), "SlotKVCache"),
}  # fmt: skip


@pytest.mark.parametrize("case", BUILT_LATE)
def test_a_bad_argument_is_refused_before_the_cache_is_built(toy_model, monkeypatch, case):
    build, cache = BUILT_LATE[case]
    from tinyllm import graphs

    built = []
    real = getattr(graphs, cache).__init__
    monkeypatch.setattr(getattr(graphs, cache), "__init__",
                        lambda self, *a, **k: built.append(a) or real(self, *a, **k))  # fmt: skip
    with pytest.raises(ValueError):
        build(toy_model)
    assert built == []
