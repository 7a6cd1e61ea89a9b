"""tinyllm.course.exercises.nb08: the checkers of notebook 08's exercises (where a position
lands in the blocks, blocks for a length, the decode write read on the device, the host's part
of a paged step between replays).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import copy
import ctypes
import functools

import numpy as np
import pytest
import torch
from conftest import assert_hint, assert_ok

from tinyllm.course.exercises import (
    check_block_of,
    check_blocks_for,
    check_paged_write,
    check_replay_loop,
)
from tinyllm.paged import PagedKVCache
from tinyllm.rows import Rows

# --- exercise 1: block and offset; blocks for a length --------------------------------------


def my_block_of(pos, block_size):
    return pos // block_size, pos % block_size


def my_blocks_for(n_positions, block_size):
    return -(-n_positions // block_size)


def test_blocks_for_is_the_caches():
    cache = PagedKVCache(1, 1, 64, "cpu", block_size=16)
    assert [cache.blocks_for(n) for n in (0, 1, 16, 17, 37)] == [
        my_blocks_for(n, 16) for n in (0, 1, 16, 17, 37)
    ]


@pytest.mark.parametrize(
    "answer",
    [my_block_of, lambda p, bs: [p // bs, p % bs], lambda p, bs: divmod(p, bs)],
    ids=["tuple", "list", "divmod"],
)
def test_block_of_right(answer, capsys):
    assert_ok(check_block_of, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda p, bs: (p // bs + 1, p % bs), ("entries count from 0",)),
        (lambda p, bs: (p % bs, p // bs), ("the table entry first",)),
        (lambda p, bs: (p // bs, p % bs + 1), ("offsets count from 0",)),
        # position == block_size kept in the first block
        (
            lambda p, bs: (p // bs, p % bs) if p != bs else (0, bs),
            ("pos=4, block_size=4", "offset 0 of the next entry"),
        ),
        (lambda p, bs: (-(-p // bs), p % bs), ("pos=3, block_size=4",)),  # ceil, not floor
        (lambda p, bs: p // bs, ("each an int",)),
        (lambda p, bs: (p / bs, p % bs), ("a float", "rounded down")),
        (lambda p, bs: ("0", "1"), ("each an int",)),
        (lambda p, bs: (p // 16, p % 16), ("another block size", "block_size argument")),
        # the entry of pos - 1 with the offset of pos: early at every multiple, 0 included
        (
            lambda p, bs: ((p - 1) // bs, p % bs),
            ("pos=0, block_size=4", "(pos - 1) // block_size lands one entry early"),
        ),
        # the answer for pos - 1: positions taken to count from 1
        (
            lambda p, bs: ((p - 1) // bs, (p - 1) % bs),
            ("pos=0, block_size=4", "already count from 0", "do not subtract 1"),
        ),
    ],
)
def test_block_of_wrong(answer, needles, capsys):
    assert_hint(check_block_of, answer, capsys, *needles)


@pytest.mark.parametrize(
    "answer",
    [my_blocks_for, lambda n, bs: (n + bs - 1) // bs, lambda n, bs: np.int64(-(-n // bs))],
)
def test_blocks_for_right(answer, capsys):
    assert_ok(check_blocks_for, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (
            lambda n, bs: n // bs,
            ("n_positions=1, block_size=4", "round n / block_size up"),
        ),  # // not ceil
        (lambda n, bs: n // bs + 1, ("n_positions=0", "no extra one")),  # one too many
        (lambda n, bs: n / bs, ("float", "Return an int", "rounded up")),
        (lambda n, bs: float(-(-n // bs)), ("float", "Return an int", "float() give a float")),
        (lambda n, bs: round(n / bs), ("n_positions=1, block_size=4", "round n / block_size up")),
        (
            lambda n, bs: PagedKVCache(1, 1, 64, "cpu", block_size=bs).blocks_for(n),
            ("calls PagedKVCache.blocks_for",),
        ),
        (
            lambda n, bs: int(Rows(1, 64, "cpu", block_size=bs).blocks_for(n)),
            ("calls Rows.blocks_for",),
        ),
        (  # unbound, as the prose names it: it raises inside the package's own answer
            lambda n, bs: PagedKVCache.blocks_for(n, bs),
            ("raised AttributeError", "calls PagedKVCache.blocks_for", "write it"),
        ),
        (
            lambda n, bs: (n - 1) // bs,
            ("n_positions=0", "table entry of the last position", "0 positions need 0 blocks"),
        ),
        (  # only n=0 is wrong: the hint leads with it
            lambda n, bs: max(1, -(-n // bs)),
            ("n_positions=0", "returned 1, expected 0: 0 positions need 0 blocks"),
        ),
    ],
    ids=[
        "floor",
        "one too many",
        "true division",
        "float",
        "round",
        "the cache's own",
        "the rows' own",
        "the cache's own, unbound",
        "the last position's entry",
        "at least one block",
    ],
)
def test_blocks_for_wrong(answer, needles, capsys):
    out = assert_hint(check_blocks_for, answer, capsys, *needles)
    assert "//" not in out  # the hint names the mistake, not an operator the answer may not use


# --- exercise 2: the decode write -----------------------------------------------------------


def my_paged_write(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    entry = (pos // block_size)[:, None]
    blocks = block_table.long().gather(1, entry)[:, 0]
    pool[blocks, :, pos % block_size] = k_new


def test_paged_write_of_another_dtype_is_told_to_keep_the_pools(capsys):
    def half(pool, k_new, block_table, lens, block_size):
        my_paged_write(pool, k_new.half(), block_table, lens, block_size)

    assert_hint(check_paged_write, half, capsys, "dtypes match", "the pool's dtype")


def write_on_the_host(pool, k_new, block_table, lens, block_size):
    for b in range(len(lens)):  # right eagerly: each length read with int()
        n = int(lens[b])
        pool[int(block_table[b, n // block_size]), :, n % block_size] = k_new[b]


def write_with_tolist(pool, k_new, block_table, lens, block_size):
    for b, n in enumerate(lens.tolist()):
        pool[block_table[b, n // block_size], :, n % block_size] = k_new[b]


def write_from_host_copies(pool, k_new, block_table, lens, block_size):
    lens, block_table = lens.cpu(), block_table.cpu()  # right on a CPU; on a GPU, host copies
    rows = torch.arange(len(lens))
    pool[block_table[rows, lens.long() // block_size], :, lens.long() % block_size] = k_new


def write_without_the_table(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    pool[pos // block_size, :, pos % block_size] = k_new


def write_one_past(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens + 1, block_size)


def write_one_before(pool, k_new, block_table, lens, block_size):
    pos = lens.long() - 1
    blocks = block_table.long()[torch.arange(len(pos)), pos // block_size]
    pool[blocks, :, pos % block_size] = k_new


def write_one_before_with_gather(pool, k_new, block_table, lens, block_size):
    pos = lens.long() - 1  # row 0, at length 0, asks the table for entry -1: gather raises
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    pool[blocks, :, pos % block_size] = k_new


def write_head_0_only(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    pool[blocks, 0, pos % block_size] = k_new[:, 0]


def write_into_a_copy(pool, k_new, block_table, lens, block_size):
    pool = pool.clone()
    my_paged_write(pool, k_new, block_table, lens, block_size)
    return pool


def write_out_of_place(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    heads = torch.arange(pool.shape[1])[None, :]
    return pool.index_put((blocks[:, None], heads, (pos % block_size)[:, None]), k_new)


def write_and_advance(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)
    lens += 1


def write_with_block_size_4(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, 4)


def write_as_a_generator(pool, k_new, block_table, lens, block_size):
    yield my_paged_write(pool, k_new, block_table, lens, block_size)


def write_row_by_row(pool, k_new, block_table, lens, block_size):
    for b in range(len(lens)):  # right eagerly: indexing with a 0-d tensor reads it
        pool[block_table[b, lens[b] // block_size], :, lens[b] % block_size] = k_new[b]


def write_on_the_wrong_axis(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    pool[blocks, pos % block_size] = k_new  # the offset on the heads' axis


def write_and_clear_the_table(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)
    block_table.zero_()


def write_from_a_copy_of_lens(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, copy.deepcopy(lens), block_size)


def test_paged_write_is_the_decode_steps():
    """The reference the checker holds is the paged decode step's write: the same pool after
    a step (rope_write_attend, its RoPE made the identity here: cos 1, sin 0)."""
    cache = PagedKVCache(1, 2, 16, "cpu", block_size=4)
    cache.allocate(1, 2, torch.float32)
    cache.rows.take([0, 1], [4, 7])  # room for the position each writes
    cache.rows.admit([0, 1], [3, 6])
    step = cache.decoding(2)
    rope_like = type("R", (), {"cos": torch.zeros(16, 1), "sin": torch.zeros(16, 1)})()
    step.begin_step(1, rope_like)
    qkv = torch.randn(2, 3, 2)  # one query head, one K/V head
    pool = cache.k[0].clone()
    step.rope_write_attend(0, qkv, torch.ones(16, 1), torch.zeros(16, 1), 1)
    my_paged_write(pool, qkv[:, 1:2], cache.block_table, cache.lens_dev, 4)
    assert torch.equal(pool, cache.k[0])


def write_reading_lens_as_the_table(pool, k_new, lens, block_table, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)


def write_reading_the_table_second(pool, block_table, k_new, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)


def write_reading_the_key_first(k_new, pool, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)


def write_reading_the_block_size_before_lens(pool, k_new, block_table, block_size, lens):
    my_paged_write(pool, k_new, block_table, lens, block_size)


def write_into_new_memory(pool, k_new, block_table, lens, block_size):
    written = pool.clone()
    my_paged_write(written, k_new, block_table, lens, block_size)
    pool.data = written


def test_paged_write_right(capsys):
    assert_ok(check_paged_write, my_paged_write, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (write_on_the_host, ("captured at lens=[2, 6, 9]", "no .item(), int()")),
        (write_with_tolist, ("captured at lens=[2, 6, 9]", "Tensor.tolist()")),
        (write_from_host_copies, ("captured at lens=[2, 6, 9]", "Tensor.cpu()")),
        (write_without_the_table, ("lens=[0, 3, 5]", "the table maps an entry")),
        (write_one_past, ("lens=[0, 3, 5]", "lens[b] + 1, one past", "is lens[b] itself")),
        (write_one_before, ("lens=[0, 3, 5]", "lens[b] - 1, one before", "is lens[b] itself")),
        (write_one_before_with_gather, ("index of -1", "one before", "lens[b] itself")),
        (write_head_0_only, ("some heads' new keys", "every K/V head")),
        (write_into_a_copy, ("lens=[0, 3, 5]", "the pool is unchanged", "in place")),
        (write_out_of_place, ("the pool is unchanged", "in place")),
        (write_and_advance, ("changed lens", "Write into pool alone")),
        (write_and_clear_the_table, ("changed block_table",)),
        (write_from_a_copy_of_lens, ("replay at lens=[3, 8, 12]", "Read lens itself")),
        (write_with_block_size_4, ("block_size=8", "with the block_size argument")),
        (write_as_a_generator, ("generator",)),
        (write_row_by_row, ("no indexing with one element of a tensor",)),
        (write_on_the_wrong_axis, ("raised RuntimeError", "the heads left whole")),
        (write_reading_lens_as_the_table, ("(pool, k_new, lens, block_table, block_size)",)),
        (write_reading_the_table_second, ("(pool, block_table, k_new, lens, block_size)",)),
        (write_reading_the_key_first, ("(k_new, pool, block_table, lens, block_size)",)),
        (write_reading_the_block_size_before_lens, ("block_size, lens)",)),
        (write_into_new_memory, ("new memory", "in place")),
    ],
    ids=[
        "int()",
        "tolist",
        "cpu",
        "no table",
        "one past",
        "one before",
        "one before, through gather",
        "head 0 only",
        "into a copy",
        "index_put",
        "advances lens",
        "clears the table",
        "a copy of lens",
        "block size 4 written in",
        "a generator",
        "row by row",
        "the wrong axis",
        "lens and the table swapped",
        "the table second",
        "the key first",
        "block_size before lens",
        "pool.data",
    ],
)
def test_paged_write_wrong(answer, needles, capsys):
    assert_hint(check_paged_write, answer, capsys, *needles)


def test_paged_write_whose_capture_bakes_in_the_lengths_is_found(capsys):
    """A write whose block and offset are Python numbers at capture (read here through the
    tensor's memory with ctypes, a host read the simulator cannot see) is right eagerly and
    at capture, and wrong at the first replay at new lengths."""

    def baked(pool, k_new, block_table, lens, block_size):
        host = (ctypes.c_int32 * len(lens)).from_address(lens.data_ptr())
        for b in range(len(lens)):
            n = host[b]
            block = block_table[b : b + 1, n // block_size].long()
            pool[block, :, n % block_size] = k_new[b : b + 1]

    assert_hint(check_paged_write, baked, capsys, "replayed at lens=[3, 8, 12]")


# --- exercise 3: the host's part of a step, between replays ---------------------------------


def my_replay_loop(decoder, tok, n_steps, grow=True, advance=True, replay=True, reset=False,
                   grow_from=0):  # fmt: skip
    cache, out = decoder.cache, []
    for i in range(n_steps):
        key = decoder.graph_key()
        decoder.tok[: tok.shape[0]].copy_(tok)
        if reset:  # the stale host twin copied into the device length before each replay
            cache.lens_dev.copy_(torch.tensor(cache.lens, dtype=torch.int32))
        if grow and i >= grow_from:
            cache.grow()
        logits = decoder.replay(key) if replay else decoder.graphs[key][1]
        for _ in range(advance):  # True: once; 2: twice a step
            cache.advance_host()
        tok = logits.argmax(-1)
        out.append(int(tok[0, 0]))
    return out


def test_replay_loop_right(toy_model, capsys):
    assert_ok(lambda fn: check_replay_loop(fn, toy_model), my_replay_loop, capsys)

    def tolist(decoder, tok, n_steps):  # the ids read as a list: Python ints too
        out = []
        for _ in range(n_steps):
            key = decoder.graph_key()
            decoder.tok.copy_(tok)
            decoder.cache.grow()
            tok = decoder.replay(key).argmax(-1)
            decoder.cache.advance_host()
            out += tok[0].tolist()
        return out

    assert_ok(lambda fn: check_replay_loop(fn, toy_model), tolist, capsys)


def test_replay_loop_default_model_leaves_the_random_state_alone(capsys):
    state = torch.random.get_rng_state()
    assert_ok(check_replay_loop, my_replay_loop, capsys)
    assert torch.equal(torch.random.get_rng_state(), state)


def with_step(decoder, tok, n_steps):
    out = []
    for _ in range(n_steps):
        tok = decoder.step(tok).argmax(-1)
        out.append(tok.item())
    return out


def with_the_class_step(decoder, tok, n_steps):
    out = []
    for _ in range(n_steps):
        tok = type(decoder).step(decoder, tok).argmax(-1)
        out.append(tok.item())
    return out


def eager_forward(decoder, tok, n_steps):
    """The model run under the cache's decode step: right ids, no graph replayed."""
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        cache.grow()
        logits, _ = decoder.model(tok, cache=cache.decoding(1))
        cache.advance_host()
        tok = logits[:, -1:].argmax(-1)
        out.append(int(tok[0, 0]))
    return out


def rebinds_tok(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok = tok  # rebinds the name: the graph reads the buffer it captured
        cache.grow()
        tok = decoder.replay(key).argmax(-1)
        cache.advance_host()
        out.append(int(tok[0, 0]))
    return out


def never_feeds_back(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)  # always the first token
        cache.grow()
        out.append(int(decoder.replay(key).argmax(-1)[0, 0]))
        cache.advance_host()
    return out


def grows_after(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)
        logits = decoder.replay(key)
        cache.grow()  # too late: the step that crossed wrote to the scratch block
        cache.advance_host()
        tok = logits.argmax(-1)
        out.append(int(tok[0, 0]))
    return out


def takes_one_short(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)
        cache.rows.take([0], [cache.lens[0]])  # room for the positions held, not the next
        tok = decoder.replay(key).argmax(-1)
        cache.advance_host()
        out.append(int(tok[0, 0]))
    return out


def argmax_after_the_loop(decoder, tok, n_steps):
    cache, kept = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)
        cache.grow()
        logits = decoder.replay(key)
        cache.advance_host()
        tok = logits.argmax(-1)
        kept.append(logits)  # the same buffer each time: the next replay overwrites it
    return [int(x.argmax(-1)[0, 0]) for x in kept]


def loop_as_a_generator(decoder, tok, n_steps):
    yield from my_replay_loop(decoder, tok, n_steps)


def advances_twice(decoder, tok, n_steps):
    out = my_replay_loop(decoder, tok, n_steps)
    for _ in range(n_steps):
        decoder.cache.advance_host()
    return out


def adds_to_lens_dev(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)
        cache.grow()
        tok = decoder.replay(key).argmax(-1)
        cache.lens_dev += 1  # the replay advanced it already
        cache.advance_host()
        out.append(int(tok[0, 0]))
    return out


def keeps_the_dim(decoder, tok, n_steps):
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)  # the second step's tok is (1, 1, 1): copy_ cannot fit it
        cache.grow()
        tok = decoder.replay(key).argmax(-1, keepdim=True)
        cache.advance_host()
        out.append(int(tok[0, 0, 0]))
    return out


@pytest.mark.parametrize(
    "answer, needles",
    [
        (with_step, ("called decoder.step", "yourself")),
        (with_the_class_step, ("called decoder.step",)),
        (eager_forward, ("replayed no graph",)),
        (lambda d, t, n: my_replay_loop(d, t, n, replay=False), ("replayed no graph",)),
        (lambda d, t, n: my_replay_loop(d, t, n - 1), ("replayed the graph 5 times",)),
        (lambda d, t, n: my_replay_loop(d, t, n, advance=False),
         ("host twin was not advanced", "cache.lens is [14]")),
        (lambda d, t, n: my_replay_loop(d, t, n, reset=True, advance=False),
         ("lens_dev is [15], expected [20]", "Never copy the host length")),
        (lambda d, t, n: my_replay_loop(d, t, n, grow=False),
         ("holds 1 block(s)", "cache.grow() before each replay")),
        (grows_after, ("position 16", "scratch block", "before each replay, not after")),
        (rebinds_tok, ("rebinds", "decoder.tok.copy_")),
        (never_feeds_back, ("position 15", "another token")),
        (lambda d, t, n: [my_replay_loop(d, t, n)[0]] * n, ("returned [", "in order")),
        (lambda d, t, n: [torch.tensor(x) for x in my_replay_loop(d, t, n)], ("Python ints",)),
        (lambda d, t, n: my_replay_loop(d, t, n)[:-1], ("a list of 5 ints", "6 Python ints")),
        (advances_twice, ("ran ahead", "once after each replay")),
        (lambda d, t, n: my_replay_loop(d, t, n, advance=2),  # lens_dev [21]: flushed by grow
         ("advance_host() 12 times for 6 replays", "ran ahead", "took it to [21], not [20]",
          "once after each replay")),
        (takes_one_short, ("position 16", "scratch block", "row 0 had no block for it")),
        (loop_as_a_generator, ("generator",)),
        (adds_to_lens_dev, ("expected [20]", "Don't add to it yourself")),
        (argmax_after_the_loop, ("fixed output buffer", "before the next replay")),
        (keeps_the_dim, ("broadcast shape [1, 1, 1]", "decoder.tok is (1, 1)",
                         "Drop keepdim=True")),
    ],
    ids=["decoder.step", "the class's step", "eager forward", "no replay", "a step short",
         "no advance_host", "stale length copied in", "no grow", "grow after", "rebound tok",
         "not fed back", "same token", "0-d tensors", "one id short", "advance_host twice",
         "advance_host twice a step",
         "a block one short", "a generator", "lens_dev += 1", "argmax after the loop",
         "argmax keepdim"],
)  # fmt: skip
def test_replay_loop_wrong(answer, needles, toy_model, capsys):
    out = assert_hint(lambda fn: check_replay_loop(fn, toy_model), answer, capsys, *needles)
    if answer in (rebinds_tok, never_feeds_back):  # a wrong token is not blamed on grow()
        assert "grow" not in out


# --- the holes a cold read found ------------------------------------------------------------


def test_blocks_for_with_a_block_size_of_its_own_gets_a_hint(capsys):
    assert_hint(check_blocks_for, lambda n, bs: -(-n // 16), capsys, "another block size")


def test_paged_write_that_adds_gets_a_hint(capsys):
    def adds(pool, k_new, block_table, lens, block_size):
        pos = lens.long()
        blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
        pool[blocks, :, pos % block_size] += k_new

    assert_hint(check_paged_write, adds, capsys, "added each key", "replacing")


def _step_on_projections(step, pool, k_new, block_table, lens, block_size):
    """The package's step called as it is meant to be: projections, RoPE's tables, pools."""
    heads, dim = pool.shape[1], pool.shape[-1]
    qkv = torch.randn(k_new.shape[0], 3 * heads, dim)
    cos, sin = torch.ones(64, dim // 2), torch.zeros(64, dim // 2)
    step(qkv, cos, sin, pool, pool.clone(), block_table, lens)


@pytest.mark.parametrize("step", ["reference_rope_write_attend", "rope_write_attend"])
@pytest.mark.parametrize("how", ["its own arguments", "the exercise's", "k_new as qkv"])
def test_paged_write_that_calls_the_packages_step_is_told_to_write_it(step, how, capsys):
    from tinyllm import kernels

    def calls_the_step(pool, k_new, block_table, lens, block_size):
        op = getattr(kernels, step)
        if how == "its own arguments":
            _step_on_projections(op, pool, k_new, block_table, lens, block_size)
        elif how == "the exercise's":  # refused at the door, before any of its code runs
            op(pool, k_new, block_table, lens, block_size)
        else:
            op(k_new, None, None, pool, pool, block_table, lens)

    out = assert_hint(check_paged_write, calls_the_step, capsys, f"calls kernels.{step},",
                      "write the write alone")  # fmt: skip
    assert "Declaration" not in out


def test_replay_loop_that_captures_again_gets_a_hint(toy_model, capsys):
    def recaptures(decoder, tok, n_steps):
        cache, out = decoder.cache, []
        for _ in range(n_steps):
            key = decoder.graph_key()
            decoder.tok.copy_(tok)
            cache.grow()
            _, logits = decoder.capture_graph(key)
            tok = decoder.replay(key).argmax(-1)
            cache.advance_host()
            out.append(int(tok[0, 0]))
        return out

    assert_hint(lambda fn: check_replay_loop(fn, toy_model), recaptures, capsys,
                "captured the graph again")  # fmt: skip


def test_replay_loop_that_grows_only_after_the_first_step_gets_a_hint(toy_model, capsys):
    """Right on the 14-token prompt (its first step needs no block); the 16-token one's
    first step writes position 16, the first of a new block."""

    def skips_the_first_grow(decoder, tok, n_steps):
        return my_replay_loop(decoder, tok, n_steps, grow_from=1)

    assert_hint(lambda fn: check_replay_loop(fn, toy_model), skips_the_first_grow, capsys,
                "position 16", "scratch block", "grow")  # fmt: skip


def test_paged_write_with_true_division_gets_the_reason(capsys):
    def true_division(pool, k_new, block_table, lens, block_size):
        pos = lens.long()
        blocks = block_table.long().gather(1, (pos / block_size)[:, None])[:, 0]
        pool[blocks, :, pos % block_size] = k_new

    assert_hint(check_paged_write, true_division, capsys, "floor division")


# --- the hints a second read found: the real mistake named ---------------------------------


@pytest.mark.parametrize(
    "values",
    [lambda k: k.flip(1), lambda k: k.flip(0), lambda k: 2 * k, lambda k: k[:, :1]],
    ids=["heads reversed", "rows swapped", "scaled", "the first head for all"],
)
def test_paged_write_to_the_right_places_with_wrong_values_is_told_so(values, capsys):
    """Each key at its row's block and offset, with the wrong values: the hint says the
    places are right, and does not send the learner to look for another place."""

    def wrong_values(pool, k_new, block_table, lens, block_size):
        my_paged_write(pool, values(k_new).expand_as(k_new), block_table, lens, block_size)

    out = assert_hint(check_paged_write, wrong_values, capsys, "right places", "wrong values",
                      "k_new[b] as it is")  # fmt: skip
    assert "goes to block" not in out


@pytest.mark.parametrize(
    "rows", [slice(0, 1), slice(None, -1)], ids=["row 0 only", "the last skipped"]
)
def test_paged_write_that_misses_rows_is_told_they_were_never_written(rows, capsys):
    def misses(pool, k_new, block_table, lens, block_size):
        my_paged_write(pool, k_new[rows], block_table[rows], lens[rows], block_size)

    out = assert_hint(check_paged_write, misses, capsys, "never written", "every row")
    assert "wrong values" not in out


def grows_on_the_host_only(decoder, tok, n_steps, flush_after=False):
    """rows.grow() hands out the block on the host; without a flush before the replay the
    device's table still points at the scratch block."""
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        key = decoder.graph_key()
        decoder.tok.copy_(tok)
        cache.rows.grow()
        tok = decoder.replay(key).argmax(-1)
        if flush_after:
            cache.rows.flush()  # too late: the step has run
        cache.advance_host()
        out.append(int(tok[0, 0]))
    return out


@pytest.mark.parametrize("flush_after", [False, True], ids=["never flushed", "flushed after"])
def test_replay_loop_that_grows_without_a_flush_is_told_to_flush(flush_after, toy_model, capsys):
    out = assert_hint(
        lambda fn: check_replay_loop(fn, toy_model),
        lambda d, t, n: grows_on_the_host_only(d, t, n, flush_after),
        capsys,
        "position 16",
        "scratch block",
        "did not have it",
        "rows.flush()",
    )
    assert "not after" not in out  # the grow came before the replay: that was not the mistake


def test_replay_loop_that_grows_after_is_not_told_to_flush(toy_model, capsys):
    out = assert_hint(lambda fn: check_replay_loop(fn, toy_model), grows_after, capsys,
                      "before each replay, not after")  # fmt: skip
    assert "flush" not in out


def test_replay_loop_that_runs_past_n_steps_gets_a_hint(capsys):
    def forever(decoder, tok, n_steps):
        return my_replay_loop(decoder, tok, 10**6)

    assert_hint(check_replay_loop, forever, capsys, "range(n_steps)",
                "your loop replayed more than n_steps times (it did not stop)")  # fmt: skip


# --- the seventh read: copies to the host, stray writes, the loop's key and order -----------


def write_through_to_cpu(pool, k_new, block_table, lens, block_size):
    pos = lens.to("cpu").long()  # right on a CPU; on a GPU, a copy to the host in capture
    pool[block_table.to("cpu")[torch.arange(len(pos)), pos // block_size], :, pos % block_size] = (
        k_new
    )


def write_with_a_cpu_arange(pool, k_new, block_table, lens, block_size):
    pos = lens.long()  # torch.arange without device=: a CPU index into the device's table
    pool[block_table.long()[torch.arange(len(pos)), pos // block_size], :, pos % block_size] = k_new


def write_with_a_list_index(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    rows = list(range(len(pos)))  # a Python list as an index: a new tensor made on the host
    pool[block_table.long()[rows, pos // block_size], :, pos % block_size] = k_new


@pytest.mark.parametrize(
    "answer, needles",
    [
        (write_through_to_cpu, ("copies a tensor to the host", '.to("cpu")')),
        (lambda pool, k, t, lens, bs: my_paged_write(
            pool, k, t, lens.to(torch.device("cpu"), non_blocking=False), bs),
         ("copies a tensor to the host",)),
        (lambda pool, k, t, lens, bs: my_paged_write(pool, k, t.to(device="cpu"), lens, bs),
         ("copies a tensor to the host",)),
        (write_with_a_cpu_arange, ("a tensor on the CPU (without device=)", "device=lens.device")),
        (write_with_a_list_index, ("a Python list used as an index", "torch.arange(n, device=")),
    ],
    ids=['.to("cpu")', ".to(torch.device)", ".to(device=)", "a device-less arange",
         "a list index"],
)  # fmt: skip
def test_paged_write_that_leaves_the_device_gets_a_hint(answer, needles, capsys):
    assert_hint(check_paged_write, answer, capsys, *needles)


def test_paged_write_made_on_the_inputs_device_passes(capsys):
    def with_rows(pool, k_new, block_table, lens, block_size):
        pos, rows = lens.long(), torch.arange(len(lens), device=lens.device)
        pool[block_table.long()[rows, pos // block_size], :, pos % block_size] = k_new

    assert_ok(check_paged_write, with_rows, capsys)


def write_the_whole_block(pool, k_new, block_table, lens, block_size):
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    pool[blocks] = k_new[:, :, None, :].expand(-1, -1, block_size, -1)


def write_one_more_before(pool, k_new, block_table, lens, block_size):
    my_paged_write(pool, k_new, block_table, lens, block_size)
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    pool[blocks, :, pos % block_size - 1] = k_new  # a second, stray write


@pytest.mark.parametrize("answer", [write_the_whole_block, write_one_more_before],
                         ids=["the whole block", "one more before"])  # fmt: skip
def test_paged_write_that_overwrites_held_keys_is_told_so(answer, capsys):
    out = assert_hint(check_paged_write, answer, capsys, "overwrote", "held already")
    assert "goes to block" not in out  # the place of the new key was right


def test_block_of_returning_a_bool_is_told_a_bool_is_not_an_int(capsys):
    assert_hint(check_block_of, lambda p, bs: (p >= bs, p % bs), capsys,
                "table entry False is a bool", "not an int")  # fmt: skip


@pytest.mark.parametrize(
    "answer",
    [lambda p, bs: torch.tensor([p // bs, p % bs]),
     lambda p, bs: (torch.tensor(p) // bs, torch.tensor(p) % bs)],
    ids=["a tensor of two", "two 0-d tensors"],
)  # fmt: skip
def test_block_of_returning_tensors_is_told_to_return_host_ints(answer, capsys):
    """The host code indexes with the pair: ints, as the hints say, not tensors."""
    assert_hint(check_block_of, answer, capsys, "host ints", "not tensors")


@pytest.mark.parametrize(
    "answer",
    [lambda p, bs: [p // bs, p % bs], lambda p, bs: (np.int64(p // bs), np.int64(p % bs))],
    ids=["a list of two", "numpy ints"],
)  # fmt: skip
def test_block_of_takes_a_pair_of_ints_in_any_form(answer, capsys):
    assert_ok(check_block_of, answer, capsys)


def test_blocks_for_returning_a_tensor_is_told_to_return_an_int(capsys):
    assert_hint(check_blocks_for, lambda n, bs: torch.tensor(-(-n // bs)), capsys,
                "a host int")  # fmt: skip


def loop_varied(decoder, tok, n_steps, key=None, dim=-1, advance_first=False, whole=False):
    """The right loop, with one thing changed: a key of its own (not graph_key()), the
    argmax over another dim, advance_host() before the replay (advance_first="grow": before
    the grow too), or the id read as int(tok) (whole)."""
    cache, out = decoder.cache, []
    for _ in range(n_steps):
        step_key = decoder.graph_key() if key is None else key
        decoder.tok.copy_(tok)
        if advance_first == "grow":  # a later grow() flushes the host's length into lens_dev
            cache.advance_host()
        cache.grow()
        if advance_first is True:  # the host counts a step the device has not run yet
            cache.advance_host()
        tok = decoder.replay(step_key).argmax(dim)
        if not advance_first:
            cache.advance_host()
        out.append(int(tok) if whole else int(tok[0, 0]))
    return out


@pytest.mark.parametrize(
    "changed, needles",
    [
        ({"key": 2}, ("KeyError", "decoder.graph_key()")),
        ({"dim": 1}, ("argmax over dim 0 or dim 1", "logits.argmax(-1)")),
        ({"dim": 0}, ("argmax over dim 0 or dim 1",)),
        ({"advance_first": True}, ("before the replay", "after decoder.replay(key)")),
        ({"advance_first": "grow"}, ("before the replay", "after decoder.replay(key)")),
        ({"dim": 1, "whole": True}, ("only one element", "argmax over dim 0 or dim 1")),
    ],
    ids=[
        "replay(2)",
        "argmax(1)",
        "argmax(0)",
        "advance_host before replay",
        "advance_host before grow",
        "argmax(1), int(tok)",
    ],  # fmt: skip
)
def test_replay_loop_seventh_read_wrong(changed, needles, toy_model, capsys):
    answer = functools.partial(loop_varied, **changed)
    assert_hint(lambda fn: check_replay_loop(fn, toy_model), answer, capsys, *needles)


def test_replay_loop_ok_names_the_steps_in_the_exercises_order(toy_model, capsys):
    assert check_replay_loop(my_replay_loop, toy_model)
    out = capsys.readouterr().out
    order = [out.find(w) for w in ("copy the token in", "grow", "replay", "advance_host")]
    assert -1 not in order and order == sorted(order), out


def test_replay_loop_with_a_key_error_of_its_own_is_not_told_of_graph_keys(toy_model, capsys):
    """A KeyError from the learner's own dict is the learner's, not a graph key's."""

    def counts_ids(decoder, tok, n_steps):
        seen = {}
        out = my_replay_loop(decoder, tok, n_steps)
        for t in out:
            seen[t] += 1  # never set: KeyError
        return out

    out = assert_hint(lambda fn: check_replay_loop(fn, toy_model), counts_ids, capsys,
                      "KeyError")  # fmt: skip
    assert "graph_key" not in out and "finds its graph by key" not in out


def test_replay_loop_with_a_key_of_its_own_is_told_to_ask_the_decoder(toy_model, capsys):
    def hard_coded_key(decoder, tok, n_steps):
        cache, out = decoder.cache, []
        for _ in range(n_steps):
            decoder.tok[: tok.shape[0]].copy_(tok)
            cache.grow()
            logits = decoder.replay(1)
            cache.advance_host()
            tok = logits.argmax(-1)
            out.append(int(tok[0, 0]))
        return out

    assert_hint(lambda fn: check_replay_loop(fn, toy_model), hard_coded_key, capsys,
                "never called decoder.graph_key()")  # fmt: skip


def test_paged_write_that_makes_a_tensor_under_capture_is_told_so(capsys):
    """torch.tensor(block_size) inside the step: a new tensor from host data, not a host read."""

    def new_tensor(pool, k_new, block_table, lens, block_size):
        bs = torch.tensor(block_size, device=lens.device)
        my_paged_write(pool, k_new, block_table, lens, bs)

    out = assert_hint(check_paged_write, new_tensor, capsys, "made a new tensor from host "
                      "values", "Python number")  # fmt: skip
    assert ".item()" not in out


def test_replay_loop_that_writes_into_its_input_token_is_told_so(toy_model, capsys):
    def writes_tok(decoder, tok, n_steps):
        cache, out = decoder.cache, []
        for _ in range(n_steps):
            key = decoder.graph_key()
            decoder.tok[: tok.shape[0]].copy_(tok)
            cache.grow()
            logits = decoder.replay(key)
            cache.advance_host()
            tok.copy_(logits.argmax(-1))  # the caller's tensor
            out.append(int(tok[0, 0]))
        return out

    assert_hint(lambda fn: check_replay_loop(fn, toy_model), writes_tok, capsys,
                "changed its input tok")  # fmt: skip


def test_replay_loop_whose_torch_raises_not_implemented_is_not_told_it_is_unsolved(
    toy_model, capsys
):
    def meta_copy(decoder, tok, n_steps):
        decoder.tok.copy_(tok.to("meta"))  # torch: NotImplementedError, Cannot copy out of meta
        return my_replay_loop(decoder, tok, n_steps)

    out = assert_hint(lambda fn: check_replay_loop(fn, toy_model), meta_copy, capsys,
                      "NotImplementedError")  # fmt: skip
    assert "not solved yet" not in out


def test_paged_write_with_the_offset_of_another_block_size_gets_a_hint(capsys):
    def offset_by_four(pool, k_new, block_table, lens, block_size):
        pos = lens.long()
        blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
        pool[blocks, :, pos % 4] = k_new

    assert_hint(check_paged_write, offset_by_four, capsys, "block_size=8")


@pytest.mark.parametrize(
    ("check", "swapped", "first"),
    [(check_block_of, lambda pos, bs: (bs // pos, bs % pos), "pos"),
     (check_blocks_for, lambda n, bs: -(-bs // n), "n_positions")],
)  # fmt: skip
def test_exercise_1_with_its_arguments_read_the_other_way_is_told_the_order(
    check, swapped, first, capsys
):
    assert_hint(check, swapped, capsys, f"the call is ({first}, block_size)")


def test_block_of_with_a_block_one_too_small_is_told_so(capsys):
    assert_hint(check_block_of, lambda pos, bs: (pos // (bs - 1), pos % (bs - 1)), capsys,
                "blocks of 3 or 5 positions", "divide by block_size itself")  # fmt: skip
