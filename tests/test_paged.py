"""The paged cache and its decoders on the CPU: the blocks' bookkeeping, the paged step against
eager generate(), replay (simulated) bit-identical to the same step run eagerly at every
length and capture size, and the paged engine's tokens."""

import pytest
import torch

from tinyllm import GraphDecoder, generate
from tinyllm.lab import simgraph
from tinyllm.paged import SCRATCH, PagedKVCache


def held(cache):
    return sorted(b for t in cache.tables for b in t)


def check_twins(cache):
    """Host and device agree (after a flush), and every block is held by one row or free."""
    cache.rows.flush()
    assert cache.lens == cache.lens_dev.tolist()
    assert cache.active == [bool(a) for a in cache.active_dev.tolist()]
    for row, blocks in enumerate(cache.tables):
        table = cache.block_table[row].tolist()
        assert table[: len(blocks)] == blocks and set(table[len(blocks) :]) <= {SCRATCH}
    assert sorted(held(cache) + cache.free) == list(range(1, cache.n_blocks))


def test_blocks_are_handed_out_at_prefill_and_at_each_block_boundary(toy_model):
    cache = PagedKVCache(toy_model.cfg.n_layers, 3, 64, "cpu", block_size=16)
    assert cache.n_blocks == 3 * 4 + 1 and cache.free == list(range(1, 13))
    cache.rows.take([2, 0], [17, 17])
    toy_model(torch.randint(0, 256, (2, 17)), cache=cache.fill([2, 0], [17, 17]))
    cache.rows.admit([2, 0], [17, 17])
    assert [len(t) for t in cache.tables] == [2, 0, 2] and cache.lens == [17, 0, 17]
    check_twins(cache)
    for step in range(16):  # positions 17..32: the step at 32 needs a third block
        cache.grow()
        toy_model(torch.zeros(3, 1, dtype=torch.long), cache=cache.decoding(3))
        cache.advance_host()
        check_twins(cache)
        assert len(cache.tables[0]) == (2 if step < 15 else 3), step
    assert cache.lens == [33, 0, 33]
    cache.rows.release([2])
    assert cache.tables[2] == [] and cache.lens[2] == 0 and len(cache.free) == 12 - 3
    cache.rows.move([0], [1])  # a request moves rows: its table row and length, not its K/V
    assert cache.lens == [0, 33, 0] and len(cache.tables[1]) == 3
    check_twins(cache)
    saved = cache.snapshot()
    cache.rows.release([1])
    cache.restore(saved)
    assert cache.snapshot() == saved
    check_twins(cache)


@pytest.mark.parametrize(("T", "counts"), [(20, [14, 14]), (14, [20, 20]), (12, [14, 9])])
def test_prompts_and_counts_that_disagree_are_refused_at_the_step(toy_model, T, counts):
    """idx must hold the longest count, right-padded at most to the blocks taken."""
    cache = PagedKVCache(toy_model.cfg.n_layers, 3, 64, "cpu", block_size=16)
    cache.rows.take([0, 2], counts)
    with pytest.raises(ValueError, match=f"idx holds {T} positions a row"):
        toy_model(torch.randint(0, 256, (2, T)), cache=cache.fill([0, 2], counts))


def test_prompts_right_padded_within_their_blocks_are_taken(toy_model):
    cache = PagedKVCache(toy_model.cfg.n_layers, 3, 64, "cpu", block_size=16)
    cache.rows.take([0, 2], [14, 9])
    logits, _ = toy_model(torch.randint(0, 256, (2, 16)), cache=cache.fill([0, 2], [14, 9]))
    assert logits.shape[:2] == (2, 16) and torch.isfinite(logits).all()


def test_a_row_without_a_request_writes_to_the_scratch_block_and_stays_finite(toy_model):
    cache = PagedKVCache(toy_model.cfg.n_layers, 2, 32, "cpu")
    cache.rows.take([0], [5])
    toy_model(torch.randint(0, 256, (1, 5)), cache=cache.fill([0], [5]))
    cache.rows.admit([0], [5])
    logits, _ = toy_model(torch.zeros(2, 1, dtype=torch.long), cache=cache.decoding(2))
    assert torch.isfinite(logits).all() and cache.lens_dev.tolist() == [6, 0]
    blocks = set(cache.tables[0])
    assert all(torch.equal(cache.k[0][b], cache.k[0][b]) for b in blocks)  # own blocks only


@pytest.fixture(scope="module")
def prompts(doc_ids):
    return torch.tensor([doc_ids[s : s + 37] for s in (1000, 5000, 9000)])


def test_the_paged_step_generates_the_eager_tokens(shipped_model, prompts):
    eager = generate(shipped_model, prompts, 60)
    paged = GraphDecoder(shipped_model, 3, max_len=128, kv="paged", use_graph=False)
    assert torch.equal(paged.generate(prompts, 60), eager)
    assert paged.graph_keys == (3,) and paged.buckets is None


def test_replay_is_the_eager_paged_step_at_every_length(shipped_model, prompts, doc_ids):
    """One graph, captured once at a short context, replays a 40-key step and, after a new
    prefill of 1000 tokens, a 1000-key step, bit for bit as the same step run eagerly."""
    kw = {"kv": "paged", "graph_api": simgraph}
    graph = GraphDecoder(shipped_model, 3, use_graph=True, **kw)
    eager = GraphDecoder(shipped_model, 3, use_graph=False, **kw)
    long = torch.tensor([doc_ids[s : s + 1000] for s in (0, 20000, 40000)])
    for idx, steps in ((prompts, 20), (long, 20)):
        tok = eager.prefill(idx)[:, -1:].argmax(-1)
        graph.prefill(idx)
        for _ in range(steps):  # across block boundaries (37 + 11 = 48, 1000 + 8 = 1008)
            a, b = graph.step(tok), eager.step(tok)
            assert torch.equal(a, b)
            tok = b[:, -1].argmax(-1, keepdim=True)
    assert list(graph.graphs) == [3]  # one graph, captured at position 37, for both


def test_chunks_of_several_prompts_give_each_prompt_its_own_logits(shipped_model, doc_ids):
    """Four prompts (1, 5, 37 and 70 tokens) prefilled together into rows 3, 0, 5 and 1, in
    chunks of 16 positions, right-padded: each prompt's logits at every position are those
    of the prompt alone through the plain causal forward, up to fp32 rounding (the batch and
    the explicit mask change the order of the sums, ~1e-5 here), and the greedy ids are the
    same. Each row holds its prompt's blocks and length; pads wrote only the scratch block."""
    lens, rows, C = [1, 5, 37, 70], [3, 0, 5, 1], 16
    prompts = [doc_ids[1000 * i : 1000 * i + n] for i, n in enumerate(lens, 1)]
    cache = PagedKVCache(shipped_model.cfg.n_layers, 6, 128, "cpu")
    cache.allocate(shipped_model.cfg.n_kv_heads, shipped_model.cfg.head_dim, torch.float32)
    cache.rows.take(rows, lens)  # every prompt's blocks, before its first chunk
    got = [[] for _ in prompts]
    forwards = 0
    with torch.no_grad():
        for start in range(0, max(lens), C):
            todo = [b for b, n in enumerate(lens) if n > start]
            counts = [min(C, lens[b] - start) for b in todo]
            idx = torch.zeros(len(todo), max(counts), dtype=torch.long)
            for i, b in enumerate(todo):
                idx[i, : counts[i]] = torch.tensor(prompts[b][start : start + counts[i]])
            step = cache.fill([rows[b] for b in todo], counts, start)
            logits, _ = shipped_model(idx, cache=step)
            forwards += 1
            for i, b in enumerate(todo):
                got[b].append(logits[i, : counts[i]])
    assert forwards == 5  # ceil(70 / 16), not one per prompt per chunk
    cache.rows.admit(rows, lens)
    check_twins(cache)
    for b, prompt in enumerate(prompts):
        with torch.no_grad():
            alone, _ = shipped_model(torch.tensor([prompt]))
        mine = torch.cat(got[b])
        torch.testing.assert_close(mine, alone[0], atol=1e-4, rtol=0)
        assert torch.equal(mine.argmax(-1), alone[0].argmax(-1)), b
        assert len(cache.tables[rows[b]]) == cache.blocks_for(lens[b])
    assert cache.lens == [5, 70, 0, 1, 0, 37]
    assert cache.active == [True, True, False, True, False, True]
    for layer in cache.k + cache.v:  # no pad wrote a block nobody holds, or past a length
        assert not layer[cache.free].any()
        for row, n in enumerate(cache.lens):
            if n % cache.block_size:
                assert not layer[cache.tables[row][-1], :, n % cache.block_size :].any(), row
