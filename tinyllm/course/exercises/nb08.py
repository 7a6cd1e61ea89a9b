"""Checkers of notebook 08 · pages: one graph for every length."""

import contextlib
import functools
import inspect
import itertools
import re
import sys
import time

import torch

from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    NEW_TENSOR_UNDER_CAPTURE,
    OWN_SECONDS,
    TooSlow,
    Verdict,
    as_int,
    call,
    captured_new_tensor,
    check_cases,
    checker,
    entered,
    equal,
    hint,
    items,
    off_device,
    ok,
    quietly,
    shown_type,
    time_limit,
)
from tinyllm.graphs import Decoder
from tinyllm.kernels import reference_rope_write_attend, validate_step_args
from tinyllm.lab import simgraph
from tinyllm.paged import SCRATCH, PagedKVCache
from tinyllm.rows import Rows

CAPTURE_SECONDS = 30.0  # a learner's function under the simulator's capture, or a loop of replays
# Each block edge is checked just past it before on it: a block size of the learner's own then
# fails off the edge first, and a position == block_size kept in the first block on the edge.
BOUNDARY_CASES = [(0, 4), (3, 4), (5, 4), (4, 4), (15, 16), (17, 16), (16, 16), (40, 16)]


# --- exercise 1: where a position lands, and how many blocks a length needs -----------------


def _where(pos: int, block_size: int) -> tuple[int, int]:
    return pos // block_size, pos % block_size


def _is_float(x) -> bool:
    return isinstance(x, float) or (isinstance(x, torch.Tensor) and x.is_floating_point())


def _is_bool(x) -> bool:
    return isinstance(x, bool) or str(getattr(x, "dtype", "")) in ("torch.bool", "bool")


def _pair(got) -> list | None:
    """The two values of a pair, in any form the prose's "a pair (i, offset)" allows: a tuple
    or list, or a tensor or numpy array of two (its elements). None if got is none of those."""
    pair = items(got)
    if pair is None and isinstance(getattr(got, "shape", None), tuple):  # torch.Size is one
        try:
            pair = list(got) if tuple(got.shape) == (2,) else None
        except Exception:  # a hostile object
            return None
    return pair


def _same_where(got, want, block_size=None, pos=None) -> str | None:
    pair = _pair(got)
    if pair is not None and len(pair) == 2 and _is_float(pair[0]):
        return (
            f"returned {shown_type(pair[0])} as the table entry: the entry is an int, the "
            f"whole blocks before the position, rounded down. / and float() give a float"
        )
    if isinstance(got, torch.Tensor) or any(isinstance(x, torch.Tensor) for x in pair or ()):
        return (
            f"returned {shown_type(got)}: the table entry and the offset are host ints, which "
            f"the cache's host code indexes with. pos // block_size on ints is an int: return "
            f"the pair of ints, not tensors"
        )
    flag = next((i for i, x in enumerate(pair or ()) if _is_bool(x)), None)
    if pair is not None and len(pair) == 2 and flag is not None:
        which, what = (
            ("table entry", "pos // block_size, the whole blocks before the position")
            if flag == 0
            else ("offset", "pos % block_size, its place in the block")
        )
        return (
            f"returned {shown_type(got)}: its {which} {bool(pair[flag])} is a bool, the answer "
            f"of a comparison, and a bool is not an int. The {which} counts: {what}"
        )
    if pair is None or len(pair) != 2 or any(as_int(x) is None for x in pair):
        return f"returned {shown_type(got)}: return the pair (table entry, offset), each an int"
    i, off = (as_int(x) for x in pair)
    if (i, off) == want:
        return None
    if pos is not None and (i, off) == _where(pos - 1, block_size):
        return (
            f"returned {(i, off)}, expected {want}: that is where position {pos - 1} is. "
            f"Positions already count from 0: position p is at p // block_size, "
            f"p % block_size; do not subtract 1"
        )
    if pos is not None and off == want[1] and i in (-(-pos // block_size), round(pos / block_size)):
        return (
            f"returned table entry {i}, expected {want[0]}: the entry is pos // block_size, "
            f"rounded down; rounding up or to the nearest lands past the block"
        )
    if (i, off) == (want[0] - 1, block_size) and want[1] == 0:
        return (
            f"returned {(i, off)}, expected {want}: offsets run 0..block_size-1, so position "
            f"{pos} is offset 0 of the next entry"
        )
    if pos is not None and any(
        (i, off) == _where(pos, b) for b in (4, 8, 16, 32) if b != block_size
    ):
        return (
            f"returned {(i, off)}, expected {want}: that is the answer for another block size. "
            f"Use the block_size argument, not a number of your own"
        )
    if (
        pos is not None
        and block_size > 2
        and (i, off) in (_where(pos, block_size - 1), _where(pos, block_size + 1))
    ):
        return (
            f"returned {(i, off)}, expected {want}: that is the answer for blocks of "
            f"{block_size - 1} or {block_size + 1} positions. A block holds block_size "
            f"positions, at offsets 0 to block_size - 1: divide by block_size itself"
        )
    if (off, i) == want:
        return f"returned {(i, off)}, expected {want}: the table entry first, then the offset"
    if (i, off) == (want[0] + 1, want[1]):
        return (
            f"returned table entry {i}, expected {want[0]}: entries count from 0, so "
            f"positions 0..block_size-1 are entry 0"
        )
    if off == want[1] + 1:
        return f"returned {(i, off)}, expected {want}: offsets count from 0"
    if pos is not None and (i, off) == ((pos - 1) // block_size, want[1]):
        return (
            f"returned {(i, off)}, expected {want}: the entry is pos // block_size. "
            f"(pos - 1) // block_size lands one entry early wherever pos is a multiple of "
            f"block_size, position 0 included"
        )
    if want[1] == 0 and i == want[0] - 1:
        return (
            f"returned {(i, off)}, expected {want}: position {pos} is a multiple of "
            f"block_size, so it is the first position of entry {want[0]}, at offset 0"
        )
    return f"returned {(i, off)}, expected {want}"


def _divided_by(first: str):
    """The explain of exercise 1's calls: a division by zero, on a case whose first argument
    is 0, is most likely a division by it, the arguments read the other way round."""

    def explain(error: Exception) -> str | None:
        if isinstance(error, ZeroDivisionError):
            return (f"this case has {first}=0. Divide by block_size, the second argument: "
                    f"the call is ({first}, block_size)")  # fmt: skip
        return None

    return explain


@checker
def check_block_of(fn) -> Verdict:
    """fn(pos, block_size) → (i, offset): position pos of a row is at offset `offset` of the
    block in its table entry i."""
    return check_cases(
        fn,
        [((p, bs), f"pos={p}, block_size={bs}") for p, bs in BOUNDARY_CASES],
        _where,
        "position p is at offset p % block_size of table entry p // block_size",
        lambda got, want, p, bs: _same_where(got, want, bs, p),
        with_args=True,
        explain=_divided_by("pos"),
    )


def _same_count(got, want, n_positions=None, block_size=None) -> str | None:
    if _is_float(got):
        return (
            f"returned {shown_type(got)}, expected the int {want}: a row holds a whole number "
            f"of blocks. Return an int, n / block_size rounded up, since the last block may "
            f"be only partly full. math.ceil gives an int; / and float() give a float"
        )
    if isinstance(got, torch.Tensor):
        return (
            f"returned {shown_type(got)}, expected the int {want}: a count of blocks is a host "
            f"int, which the free list is handed out by. -(-n // block_size) on ints is an int"
        )
    n = as_int(got)
    if n is None:
        return f"returned {shown_type(got)}, expected the int {want}"
    if n == want:
        return None
    if n_positions is not None and any(
        n == -(-n_positions // b) for b in (4, 8, 16, 32) if b != block_size
    ):
        return (
            f"returned {n}, expected {want}: that is the count for another block size. Use "
            f"the block_size argument, not a number of your own"
        )
    if (
        n_positions is not None
        and n == (n_positions - 1) // block_size != n_positions // block_size
    ):
        return (
            f"returned {n}, expected {want}: that is the table entry of the last position, "
            f"not a count of blocks. A count is that entry + 1, and 0 positions need 0 "
            f"blocks: ceil(n / block_size)"
        )
    if n == want - 1:
        return (
            f"returned {n}, expected {want}: the last block may be only partly full, and it "
            f"is still a block the row holds. So round n / block_size up, not down and not "
            f"to the nearest"
        )
    if n == want + 1:
        return (
            f"returned {n}, expected {want}: a length that fills its blocks exactly needs "
            f"no extra one (and 0 positions need 0 blocks)"
        )
    return f"returned {n}, expected {want}"


@checker
def check_blocks_for(fn) -> Verdict:
    """fn(n_positions, block_size) → blocks a row of that length holds (PagedKVCache.blocks_for)."""
    cases = [(0, 4), (1, 4), (4, 4), (5, 4), (8, 4), (16, 16), (17, 16), (37, 16)]

    def own_answer(ran) -> str | None:
        used = next((f for f in (PagedKVCache.blocks_for, Rows.blocks_for) if ran[f]), None)
        return None if used is None else (
            f"your function calls {used.__qualname__}, the package's own answer: this "
            f"exercise is to write it. Divide, and round up"
        )  # fmt: skip

    with entered(PagedKVCache.blocks_for, Rows.blocks_for) as ran:
        first = call(fn, (5, 4), "n_positions=5, block_size=4", seconds=CALL_SECONDS,
                     explain=lambda error: own_answer(ran))  # fmt: skip
    if first is FAILED:
        return False
    if own_answer(ran):
        return hint(own_answer(ran))

    def only_zero_wrong() -> bool:
        """Whether fn answers every case but 0 positions right (a max(1, ...) floor)."""
        try:
            with time_limit(CALL_SECONDS, "too slow"):
                return all(
                    not _is_float(got := fn(n, bs)) and as_int(got) == -(-n // bs)
                    for n, bs in cases
                    if n
                )
        except (Exception, TooSlow):
            return False

    def same(got, want, n_positions, block_size) -> str | None:
        if n_positions == 0 and not _is_float(got) and as_int(got) == 1 and only_zero_wrong():
            return (
                "returned 1, expected 0: 0 positions need 0 blocks. Every other length is "
                "right: a row with no positions holds no block, so no count is raised to "
                "at least 1"
            )
        return _same_count(got, want, n_positions, block_size)

    return check_cases(
        fn,
        [((n, bs), f"n_positions={n}, block_size={bs}") for n, bs in cases],
        lambda n, bs: -(-n // bs),
        "a row of n positions holds ceil(n / block_size) blocks",
        same,
        with_args=True,
        explain=_divided_by("n_positions"),
    )


# --- exercise 2: the decode write, at block and offset, read on the device ------------------


def _reference_write(pool, k_new, block_table, lens, block_size, add=False):
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    if add:  # a learner's slip: the key added to what was there
        pool[blocks, :, pos % block_size] += k_new
    else:
        pool[blocks, :, pos % block_size] = k_new


def _write_case(lens, block_size=4, n_blocks=16, heads=2, dim=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows, width = len(lens), 4
    perm = torch.randperm(n_blocks - 1, generator=g)[: rows * width] + 1  # never the scratch
    table = perm.view(rows, width).to(torch.int32)
    pool = torch.randn(n_blocks, heads, block_size, dim, generator=g)
    k_new = torch.randn(rows, heads, dim, generator=g)
    return pool, k_new, table, torch.tensor(lens, dtype=torch.int32), block_size


def _places_written(pool, block_table, lens, block_size) -> torch.Tensor:
    """(n_blocks, block_size) bool: the places (block, offset) the reference writes, one a
    row."""
    pos = lens.long()
    blocks = block_table.long().gather(1, (pos // block_size)[:, None])[:, 0]
    places = torch.zeros(pool.shape[0], pool.shape[2], dtype=torch.bool)
    places[blocks, pos % block_size] = True
    return places


def _write_problem(got_pool, want_pool, places, before=None) -> str | None:
    """What is wrong with the pool a write left; places: those the reference writes; before:
    the pool as the function was handed it."""
    if torch.equal(got_pool, want_pool):
        return None
    diff = (got_pool != want_pool).any(dim=-1)  # (n_blocks, heads, block_size)
    block, _, off = (int(x) for x in diff.nonzero()[0])
    on_places = bool(places[:, None, :].expand_as(diff)[diff].all())
    if on_places and before is not None:
        kept = (got_pool == before).all(dim=-1) & diff  # wrong because never written
        written = (got_pool == want_pool).all(dim=-1) & places[:, None, :]
        heads_apart = (kept.any(dim=1) & (written & ~kept).any(dim=1)).any()
        if bool(heads_apart):
            return (
                f"block {block}, offset {off} holds some heads' new keys and not others': "
                f"write every K/V head at once, pool[blocks, :, offsets] = k_new, the heads "
                f"left whole"
            )
    if on_places and before is not None and torch.equal(got_pool[diff], before[diff]):
        return (
            f"block {block}, offset {off} of the pool was never written: a row's new key is "
            f"missing there. Write every row b, 0 to B - 1, not some of them"
        )
    if on_places:  # right places, wrong values
        return (
            f"your function wrote to the right places, with the wrong values: block {block}, "
            f"offset {off} of the pool does not hold its row's new key. Write k_new[b] as it "
            f"is, shape (kv_heads, D), at row b's block and offset: not another row's key, "
            f"not reordered, not scaled"
        )
    stray = diff & ~places[:, None, :]  # changed where the reference writes nothing
    placed = (got_pool == want_pool).all(dim=-1) | ~places[:, None, :]
    if before is not None and bool(placed.all()) and bool(stray.any()):
        block, _, off = (int(x) for x in stray.nonzero()[0])
        return (
            f"every row's new key is in its place, but your function also overwrote block "
            f"{block}, offset {off}, a key held already (an earlier position of a row, "
            f"another row's, or a free block's): write one place a row, pool[blocks, :, "
            f"offsets] = k_new, and leave every other key as it was"
        )
    return (
        f"block {block}, offset {off} of the pool holds the wrong values: row b's new key "
        f"goes to block block_table[b, lens[b] // block_size] (the table maps an entry to a "
        f"block of the pool), offset lens[b] % block_size"
    )


def _shifted_write(got_pool, before, case) -> str | None:
    """What is wrong when every key went one position past its place, or one before."""
    _, k_new, table, lens, block_size = case
    for shift, where in ((1, "one past"), (-1, "one before")):
        pos = lens.long() + shift
        if (pos // block_size).max() >= table.shape[1]:
            continue
        moved = before.clone()  # position -1 is the table's last entry, as Python's [-1]
        blocks = table.long()[torch.arange(len(pos)), pos // block_size]
        moved[blocks, :, pos % block_size] = k_new
        if torch.equal(got_pool, moved):
            return (
                f"every key went to position lens[b] {'+' if shift > 0 else '-'} 1, {where} "
                f"its place. lens[b] keys are held already, at positions 0 to lens[b] - 1, so "
                f"the new key's position is lens[b] itself"
            )
    return None


def _changed_input(now, before) -> str | None:
    names = ("k_new", "block_table", "lens")
    return next((n for n, a, b in zip(names, now, before) if not torch.equal(a, b)), None)


def _explain_write(error: Exception) -> str | None:
    if any(m in str(error) for m in ("indices must be long", "as indices must be",
                                     "Expected dtype int32/int64 for index")):  # fmt: skip
        return "indices must be integers: lens // block_size, floor division, not /"
    if "index -1 is out of bounds" in str(error):
        return (
            "an index of -1: position lens[b] - 1 is one before the new key's place. lens[b] "
            "keys are held already, at positions 0 to lens[b] - 1, so the new key goes at "
            "lens[b] itself"
        )
    if "dtypes match" in str(error) or "expected scalar type" in str(error):
        return (
            "the key written must have the pool's dtype: write k_new as it comes (or "
            "k_new.to(pool.dtype)), not a copy converted to another dtype (.half(), .float())"
        )
    if "out of bounds" in str(error):
        return (
            "an index past the table or the pool: row b's entry is lens[b] // block_size, "
            "with the block_size argument, and its offset lens[b] % block_size"
        )
    if "shape mismatch" in str(error) or isinstance(error, IndexError):
        return (
            "k_new[b] is (kv_heads, D) and goes to pool[block, :, offset]: index the pool "
            "with the blocks and the offsets of every row at once, the heads left whole"
        )
    return None


def _run_write(fn, case, shown_as):
    """fn on the case: the pool it was handed, after the call; FAILED after a hint."""
    pool, k_new, table, lens, bs = case
    out = call(fn, (pool, k_new, table, lens, bs), shown_as, none_ok=True, seconds=CALL_SECONDS,
               explain=_explain_write)  # fmt: skip
    if inspect.isgenerator(out):
        hint(f"on {shown_as}: your function is a generator (it yields), so it never ran. "
             f"Write into pool, and return nothing")  # fmt: skip
        return FAILED
    return FAILED if out is FAILED else pool


IN_PLACE = (
    "write into `pool` itself, in place (pool[blocks, :, offsets] = k_new, or index_put_): "
    "a copy, or a new tensor returned, leaves the cache as it was, and a graph replays only "
    "the writes into the buffers it captured"
)


def _warm_simulator() -> None:
    """One capture of nothing much, so that what the simulator loads on its first use (it
    imports parts of torch lazily) is loaded before a learner's function is timed."""
    x, y = torch.zeros(2), torch.ones(2)
    with simgraph.graph(simgraph.CUDAGraph()):
        x.add_(y)


def _another_order(fn) -> str | None:
    """The order of the five arguments in which fn writes the keys right, when it does not in
    the step's own order (tried first): a function whose parameters are swapped. Else None,
    also when the orders take more than OWN_SECONDS in all."""
    names = ("pool", "k_new", "block_table", "lens", "block_size")
    # OWN_SECONDS for every order: a slow function is the checker's own call's to report
    deadline = time.monotonic() + OWN_SECONDS
    for order in itertools.permutations(range(5)):
        case = _write_case([1, 6, 9], block_size=4, seed=2)
        want = case[0].clone()
        _reference_write(want, *case[1:])
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        out = quietly(fn, tuple(case[i] for i in order), left)
        if out is FAILED or not torch.equal(case[0], want):
            continue
        return None if order == (0, 1, 2, 3, 4) else ", ".join(names[i] for i in order)
    return None


# the package's fused step writes a key too; a function that calls it is not the exercise's.
# The op checks its arguments first (validate_step_args), then runs the reference on a CPU:
# the op is named before the reference it runs.
LIBRARY_STEPS = {validate_step_args: "kernels.rope_write_attend",
                 reference_rope_write_attend: "kernels.reference_rope_write_attend"}  # fmt: skip
# what each says when handed the wrong arguments, before any of its code runs: torch's check of
# the op's schema, Python's of the reference's parameters
LIBRARY_ERRORS = {"reference_rope_write_attend()": "kernels.reference_rope_write_attend",
                  "tinyllm::rope_write_attend()": "kernels.rope_write_attend"}  # fmt: skip


def _library_step(fn) -> str | None:
    """The package's step fn calls on a case, entered or refused at its door; None when it
    calls none."""
    case = _write_case([1, 6, 9], block_size=4, seed=2)
    refused = []

    def watched(*args):
        try:
            return fn(*args)
        except Exception as e:
            refused.extend(n for text, n in LIBRARY_ERRORS.items() if text in str(e))
            raise

    with entered(*LIBRARY_STEPS) as ran:
        quietly(watched, case, OWN_SECONDS)
    return next((name for f, name in LIBRARY_STEPS.items() if ran[f]), None) or next(
        iter(refused), None
    )


@checker
def check_paged_write(fn) -> Verdict:
    """fn(pool, k_new, block_table, lens, block_size) writes row b's k_new[b] (heads, D) into
    pool (n_blocks, heads, block_size, D) at position lens[b] of its blocks, in place, with
    device ops only: run eagerly, then captured once under the CPU graph simulator and
    replayed at new lengths (across a block boundary)."""
    library = _library_step(fn)
    if library:
        return hint(
            f"your function calls {library}, the package's whole attention step: it takes "
            f"the projections and RoPE's tables, not these arguments. This exercise asks you "
            f"to write the write alone: find each row's block and offset from lens and "
            f"block_table, and index pool with them"
        )
    order = _another_order(fn)
    if order:
        return hint(
            f"your function writes the keys right when handed its arguments as ({order}): "
            f"the step calls it as fn(pool, k_new, block_table, lens, block_size). Read them "
            f"in that order"
        )
    eager = [([0, 3, 5], 4), ([4, 7, 15], 4), ([1, 8, 17], 8), ([5, 8, 14], 8)]
    for lens, bs in eager:
        shown_as = f"lens={lens}, block_size={bs}"
        case = _write_case(lens, block_size=bs)
        before, want = case[0].clone(), case[0].clone()
        inputs = [t.clone() for t in case[1:4]]  # k_new, block_table, lens: read, never written
        _reference_write(want, *case[1:])
        memory = case[0].data_ptr()
        got = _run_write(fn, case, shown_as)
        if got is FAILED:
            return False
        if got.data_ptr() != memory:
            return hint(
                f"on {shown_as} your function gave pool new memory (pool.data = ..., or "
                f"set_()): {IN_PLACE}"
            )
        changed = _changed_input(case[1:4], inputs)
        if changed:
            return hint(
                f"on {shown_as} your function changed {changed}: the step only reads it. "
                f"Write into pool alone (the cache's end_step advances lens, grow() fills "
                f"the table)"
            )
        if torch.equal(got, before):
            return hint(f"on {shown_as} the pool is unchanged: {IN_PLACE}")
        added = before.clone()
        _reference_write(added, *case[1:], add=True)
        if torch.allclose(got, added) and not torch.allclose(got, want):
            return hint(
                f"on {shown_as} your function added each key to what the pool held there "
                f"(+=, accumulate=True): write it, replacing the old value"
            )
        shifted = _shifted_write(got, before, case)
        if shifted:
            return hint(f"on {shown_as} {shifted}")
        problem = _write_problem(got, want, _places_written(case[0], *case[2:]), before)
        if problem:
            other = ". Use the block_size argument, not a number of your own" if bs != 4 else ""
            return hint(f"on {shown_as}: {problem}{other}")
    _warm_simulator()
    pool, k_new, table, lens, bs = _write_case([2, 6, 9], seed=1)
    graph = simgraph.CUDAGraph()
    try:
        with time_limit(
            CAPTURE_SECONDS, f"your function did not finish within {CAPTURE_SECONDS:g} s"
        ):
            with simgraph.graph(graph):
                fn(pool, k_new, table, lens, bs)
    except TooSlow as e:
        return hint(f"under capture, lens=[2, 6, 9]: {e}")
    except Exception as e:  # the stub's NotImplementedError failed the eager cases first
        why = str(e).split("\n")[0].split(". ")[0].rstrip(".")  # the error, not its advice
        if captured_new_tensor(e):
            return hint(f"captured at lens=[2, 6, 9], your function failed: "
                        f"{NEW_TENSOR_UNDER_CAPTURE}")  # fmt: skip
        return hint(
            f"captured at lens=[2, 6, 9], your function failed. {type(e).__name__}: {why}. "
            f"The step must find the block and offset on the device, with tensor ops: no "
            f".item(), int(), .cpu() or .tolist(), no indexing with one element of a tensor, no "
            f"Python number read from a length"
        )
    for new in ([3, 8, 12], [4, 11, 15]):  # each replay at new lengths: 3→4 crosses a block
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        k_new.copy_(torch.randn(k_new.shape))
        want = pool.clone()
        _reference_write(want, k_new, table, lens, bs)
        try:
            graph.replay()
        except Exception as e:
            why = str(e).split("\n")[0][:160]
            return hint(
                f"captured at lens=[2, 6, 9], your function's graph failed on replay at "
                f"lens={new} under the course's simulator ({type(e).__name__}: {why}). It "
                f"replays aten ops on tensors; copy.deepcopy copies storages, which it cannot "
                f"replay. Read lens itself, with tensor ops (lens.long(), a clone)"
            )
        if not torch.equal(pool, want):
            return hint(
                f"captured at lens=[2, 6, 9] and replayed at lens={new}, the keys went to the "
                f"wrong place: the graph replays the block and offset it captured. Compute "
                f"them from lens on the device (tensor ops), never from a Python number"
            )
    away = off_device(fn, _write_case([2, 6, 9], seed=1), "lens.device")
    if away:
        return hint(f"on lens=[2, 6, 9], with every tensor on the device, your function {away}")
    return ok("the write reads lens and the table on the device: one capture serves every length")


# --- exercise 3: the host's part of a paged decode step, between replays ---------------------


def _decoder(model, prompt):
    from tinyllm import GraphDecoder

    dec = GraphDecoder(model, prompt.shape[0], max_len=64, kv="paged", graph_api=simgraph)
    dec.prefill(prompt)
    dec.capture()
    return dec


@functools.cache
def _toy_model():
    """The toy preset with seed-0 weights, made without touching the learner's random state."""
    from tinyllm import Transformer
    from tinyllm.config import get_config

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(get_config("toy")).eval()


def _keys(cache, n: int) -> torch.Tensor:
    """Row 0's first n keys of layer 0, read through its block table: (n, kv_heads, D)."""
    pos = torch.arange(n)
    blocks = torch.tensor(cache.tables[0])[pos // cache.block_size]
    return cache.k[0][blocks, :, pos % cache.block_size]


def _first_wrong_key(cache, ref, n: int) -> int | None:
    """The first of row 0's n positions whose key differs from the reference run's, or None."""
    differs = (_keys(cache, n) != _keys(ref, n)).flatten(1).any(1).nonzero()
    return int(differs[0]) if len(differs) else None


def _in_scratch(cache, ref, pos: int) -> bool:
    """Does the scratch block hold the key that belongs at position pos of row 0? A step
    whose block was handed out only after it ran wrote its key there."""
    scratch = cache.k[0][SCRATCH, :, pos % cache.block_size]
    return torch.equal(scratch, _keys(ref, pos + 1)[pos])


def _scratch_problem(pos: int, device_behind: bool) -> str:
    """device_behind: when the step that wrote pos ran, the host had handed row 0 a block
    that the device's block table did not have yet (a grow never flushed)."""
    if device_behind:
        return (
            f"the key of position {pos} went to the scratch block, not to row 0's blocks: "
            f"the host had handed row 0 its new block, but the device's block table did not "
            f"have it when the step ran. rows.grow() changes the host only; a flush brings "
            f"the device in step. Call cache.grow() before each replay: it is rows.grow(), "
            f"then rows.flush()"
        )
    return (
        f"the key of position {pos} went to the scratch block, not to row 0's blocks: "
        f"when the step ran, row 0 had no block for it. Call cache.grow() before each "
        f"replay, not after: it hands out the block the step's position needs"
    )


def _device_behind(rows) -> bool:
    """Does row 0's block table on the device lack a block that the host has handed out?
    Never raises (it runs inside a profile hook, under the learner's code): False if the rows
    cannot be read."""
    try:
        held = int(rows.host.held[0])
        host = torch.from_numpy(rows.tables_host[0, :held].copy())
        return not torch.equal(rows.block_table[0, :held].cpu(), host)
    except Exception:
        return False


def _lens_at(rows) -> tuple[int, int] | None:
    """Row 0's (host, device) lengths; None if they cannot be read (never raises, as
    _device_behind)."""
    try:
        return int(rows.lens[0]), int(rows.lens_dev[0])
    except Exception:
        return None


@contextlib.contextmanager
def _tables_at_replay(rows):
    """While the block runs, at the start of each graph replay: _device_behind(rows) and
    row 0's lengths (_lens_at), one of each a replay, in two lists. Chained to the profile
    hook set before it (harness.entered's), which goes on counting."""
    behind, lens, previous = [], [], sys.getprofile()
    code = simgraph.CUDAGraph.replay.__code__

    def profile(frame, event, arg):
        if previous is not None:
            previous(frame, event, arg)
        if event == "call" and frame.f_code is code:
            behind.append(_device_behind(rows))
            lens.append(_lens_at(rows))

    sys.setprofile(profile)
    try:
        yield behind, lens
    finally:
        sys.setprofile(previous)


def _holds(graphs, key: tuple) -> bool:
    """Whether graphs holds key[0]; False for no key, or one that cannot be a key."""
    try:
        return bool(key) and key[0] in graphs
    except Exception:
        return False


ARGMAX_DIM = (  # logits.argmax(1) or argmax(0): the axis of size 1, the vocabulary's kept
    "decoder.tok is (1, 1), and replay() returns logits (1, 1, V): an argmax over dim "
    "0 or dim 1, each of size 1, leaves a (1, V) tensor of zeros. Take the argmax "
    "over the vocabulary, the last dim: logits.argmax(-1), of shape (1, 1)"
)


def _argmax_kept_the_vocab(error: Exception, decoder) -> bool:
    """Whether a frame the error passed through holds an integer tensor whose last dim is
    the vocabulary's: an argmax over dim 0 or 1 of the (1, 1, V) logits."""
    try:
        V = next(iter(decoder.graphs.values()))[1].shape[-1]
        tb = error.__traceback__
        while tb is not None:
            for x in list(tb.tb_frame.f_locals.values()):
                if (isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[-1] == V > 1
                        and not x.dtype.is_floating_point and x.dtype != torch.bool):  # fmt: skip
                    return True
            tb = tb.tb_next
    except Exception:  # no graph, or a frame that cannot be read
        return False
    return False


def _raised_in_replay(error: Exception) -> bool:
    """Whether the error came from inside a graph replay's lookup (graphs.py's replay)."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "replay" and code.co_filename == Decoder.replay.__code__.co_filename:
            return True
        tb = tb.tb_next
    return False


def _explain_loop(error: Exception, decoder) -> str | None:
    if (isinstance(error, KeyError) and _raised_in_replay(error)
            and not _holds(decoder.graphs, error.args[:1])):  # fmt: skip
        return (
            f"decoder.replay(key) finds its graph by key, and this decoder holds graphs for "
            f"the keys {sorted(decoder.graphs)} only. Take the key from decoder.graph_key() "
            f"at each step (the capture size that holds the rows in use), not a number of "
            f"your own"
        )
    if _argmax_kept_the_vocab(error, decoder):
        return ARGMAX_DIM
    if isinstance(error, ValueError) and "full" in str(error):
        return (
            "the loop ran past n_steps and filled the cache: replay exactly n_steps times, "
            "for _ in range(n_steps)"
        )
    shape = re.search(
        r"shape \[1, 1\] doesn't match the broadcast shape \[1, 1, (\d+)\]", str(error)
    )
    if shape and shape[1] == "1":  # decoder.tok.copy_(logits.argmax(-1, keepdim=True))
        return (
            "decoder.tok is (1, 1), and replay() returns logits (1, 1, V): logits.argmax(-1) "
            "is (1, 1) already, and keepdim=True makes it (1, 1, 1). Drop keepdim=True"
        )
    if shape:  # decoder.tok.copy_(logits)
        return (
            "decoder.tok is (1, 1), one id a row, and replay() returns logits (1, 1, V): copy "
            "in the id the step chose, logits.argmax(-1), not the logits"
        )
    if re.search(r"shape \[1, 1\] doesn't match the broadcast shape \[1, \d+\]", str(error)):
        return ARGMAX_DIM
    return None


DECODER_STEP = (
    "your loop called decoder.step, which does the whole step for you. Write its host part "
    "yourself: key = decoder.graph_key(), copy the token into decoder.tok, cache.grow(), "
    "decoder.replay(key), cache.advance_host()"
)


ADVANCED_FIRST = (
    "cache.advance_host() ran before the replay: when the graph ran, row 0's host length was "
    "{} and the device's {}. The host twin follows the device: advance it after "
    "decoder.replay(key), once the step it counts has run (a replay that failed would leave "
    "the host counting a step never taken)"
)


def _loop_problem(fn, model, T: int, n_steps: int) -> str | None | object:
    """fn's loop after a T-token prompt, n_steps steps: a hint, None, or FAILED (hinted)."""
    g = torch.Generator().manual_seed(T)
    prompt = torch.randint(0, 256, (1, T), generator=g)
    shown_as = f"a {T}-token prompt, {n_steps} steps"
    ref, tok, want = _decoder(model, prompt), prompt[:, -1:], []
    for _ in range(n_steps):
        tok = ref.step(tok).argmax(-1)
        want.append(int(tok[0, 0]))
    dec = _decoder(model, prompt)
    tok_buffer = dec.tok
    watched = (Decoder.step, Decoder.capture_graph, simgraph.CUDAGraph.replay, Rows.advance_host,
               Decoder.graph_key)  # fmt: skip
    ran_on = []  # the error a loop raised after more than n_steps replays

    def loop(*args):
        try:
            return fn(*args)
        except Exception as e:
            if ran[simgraph.CUDAGraph.replay] <= n_steps:
                raise
            ran_on.append(e)
            return ran_on

    given = prompt[:, -1:].clone()
    with entered(*watched) as ran, _tables_at_replay(dec.cache.rows) as (behind, lens_at):
        got = call(loop if callable(fn) else fn, (dec, given, n_steps),
                   shown_as, seconds=CAPTURE_SECONDS,
                   explain=lambda error: _explain_loop(error, dec))  # fmt: skip
    if got is FAILED:
        return FAILED
    if not torch.equal(given, prompt[:, -1:]):
        return (
            "your loop changed its input tok in place (tok.copy_(...)): the caller's tensor is "
            "not yours to write. Copy each id into decoder.tok, and keep the next id under a "
            "name of your own, tok = logits.argmax(-1)"
        )
    if ran_on:
        e = ran_on[0]
        return (
            f"your loop replayed more than n_steps times (it did not stop): on {shown_as} it "
            f"replayed {ran[simgraph.CUDAGraph.replay]} times, then raised "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}. Replay exactly "
            f"n_steps times, for _ in range(n_steps), and return the ids"
        )
    if inspect.isgenerator(got):
        return (
            "your function is a generator (it yields), so its loop never ran: take the "
            "steps, then return the list of ids"
        )
    if ran[Decoder.step]:
        return DECODER_STEP
    if ran[Decoder.capture_graph]:
        return (
            "your loop captured the graph again: the decoder's graph is captured already, "
            "once. Replay it, decoder.replay(key), every step"
        )
    replays = ran[simgraph.CUDAGraph.replay]
    if replays == 0:
        return (
            "your loop replayed no graph: the model ran eagerly, or not at all. Replay the "
            "captured graph with decoder.replay(key): that is the step this exercise is about"
        )
    if replays != n_steps:
        return (
            f"your loop replayed the graph {replays} times for n_steps={n_steps}: one replay "
            f"per step, n_steps steps"
        )
    if dec.tok is not tok_buffer:
        return (
            "decoder.tok is a new tensor after your loop: `decoder.tok = ...` rebinds the "
            "name, and the graph goes on reading the buffer it captured. Copy each token into "
            "the buffer in place: decoder.tok.copy_(tok)"
        )
    c = dec.cache
    host, device = c.lens[0], int(c.lens_dev[0])
    if ran[Rows.advance_host] > replays:  # the host counted more steps than the device ran
        flushed = (
            f" (and a grow() flushed a host length run ahead into lens_dev: that took it to "
            f"[{device}], not [{T + n_steps}])"
            if device > T + n_steps
            else ""
        )
        return (
            f"your loop called cache.advance_host() {ran[Rows.advance_host]} times for "
            f"{replays} replays: each call counts one step on the host, so cache.lens ran "
            f"ahead of the device's lens_dev, [{host}] against [{device}]{flushed}. Call it "
            f"once after each replay, not more"
        )

    def in_scratch(pos: int) -> str:  # the step that wrote pos was the (pos - T)-th replay
        return _scratch_problem(pos, 0 <= pos - T < len(behind) and behind[pos - T])

    # a replay that ran while the host counted a step ahead: advance_host() before it
    ahead = next((at for at in lens_at if at is not None and at[0] > at[1]), None)
    if device < T + n_steps:
        # a grow between a replay and advance_host flushed the row from a host one behind
        wrong = _first_wrong_key(c, ref.cache, min(device, len(c.tables[0]) * c.block_size))
        if wrong is not None and _in_scratch(c, ref.cache, wrong):
            return in_scratch(wrong)
        return (
            f"after {n_steps} replays from a {T}-token prompt lens_dev is [{device}], expected "
            f"[{T + n_steps}]: the replayed end_step advances lens_dev by itself. Never copy "
            f"the host length into it: the host follows the device (cache.advance_host()), "
            f"not the other way round"
        )
    if device > T + n_steps and ahead is not None:  # and a later grow() flushed it on
        return ADVANCED_FIRST.format(*ahead)
    if device > T + n_steps:
        return (
            f"after {n_steps} replays from a {T}-token prompt lens_dev is [{device}], expected "
            f"[{T + n_steps}]: the replayed end_step advances lens_dev by itself, once a "
            f"step. Don't add to it yourself, and call cache.advance_host() once after each "
            f"replay: a host length run ahead is flushed into lens_dev by the next grow()"
        )
    if host < device:
        return (
            f"after your loop cache.lens is [{host}] but lens_dev is [{device}]: the host twin "
            f"was not advanced (cache.advance_host() after each replay), so grow() hands "
            f"out no block when a row crosses into a new one"
        )
    if host > device:
        return (
            f"after your loop cache.lens is [{host}] but lens_dev is [{device}]: the host twin "
            f"ran ahead. Call cache.advance_host() once after each replay, not more"
        )
    if len(c.tables[0]) < c.blocks_for(device):
        return (
            f"after your loop row 0 is {device} positions long but holds "
            f"{len(c.tables[0])} block(s): call cache.grow() before each replay, so the step "
            f"that crosses into a new block has one to write"
        )
    wrong = _first_wrong_key(c, ref.cache, device)
    if wrong is not None and _in_scratch(c, ref.cache, wrong):
        return in_scratch(wrong)
    if wrong is not None:
        return (
            f"the key of position {wrong} is not the one the reference run wrote: the step "
            f"that wrote it ran on another token. Feed each step the id the step before chose "
            f"(the argmax of the logits replay() returned), copied into decoder.tok"
        )
    if ahead is not None:
        return ADVANCED_FIRST.format(*ahead)
    if not ran[Decoder.graph_key]:
        return (
            "your loop never called decoder.graph_key(): a key of your own fits this "
            "decoder's one capture size, not a decoder whose rows change. Take key = "
            "decoder.graph_key() at each step"
        )
    ids = items(got)
    if ids is None or len(ids) != n_steps or any(type(x) is not int for x in ids):
        return (
            f"returned {shown_type(got)}: return a list of {n_steps} Python ints, row 0's ids "
            f"as the host reads them (int(t) or t.item() of each)"
        )
    problem = equal(ids, want)
    if problem and n_steps > 1 and ids == [want[-1]] * n_steps:
        return (
            f"on {shown_as} your function returned {ids}, the last step's id {n_steps} times, "
            f"expected {want}: replay() returns the graph's fixed output buffer, which the "
            f"next replay overwrites. Read each step's id (int(...)) before the next replay"
        )
    if problem:
        return (
            f"on {shown_as} your function {problem}: the cache holds the "
            f"right keys, so the steps ran right; return the id each step chose, the argmax "
            f"of the logits replay() returned, in order"
        )
    return None


@checker
def check_replay_loop(fn, model=None) -> Verdict:
    """fn(decoder, tok, n_steps) → the n_steps greedy next ids of row 0 (Python ints),
    replaying the decoder's one paged graph itself: each step copies the token in, hands out
    the blocks it writes (grow), replays, then advances the host lengths (advance_host), as
    Decoder.step does, without calling it. Two prompts: 14 tokens, where the third step
    writes position 16, the first of a new block; then 16, where the first step does. What
    the learner's loop ran is counted by code object (harness.entered): decoder.step,
    captures, each graph replay, and each advance_host."""
    model = _toy_model() if model is None else model
    for T, n_steps in ((14, 6), (16, 3)):
        problem = _loop_problem(fn, model, T, n_steps)
        if problem is FAILED:
            return False
        if problem:
            return hint(problem)
    return ok("copy the token in, grow, replay, advance_host: the graph serves every length")
