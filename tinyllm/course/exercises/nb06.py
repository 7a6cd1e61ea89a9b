"""Checkers of notebook 06 · continuous batching."""

import torch

from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    Verdict,
    as_int,
    as_number,
    bits,
    call,
    check_cases,
    checker,
    entered,
    hint,
    same_mask,
    shown,
    shown_type,
)
from tinyllm.kv_cache import slot_mask


def _pairs(got) -> list[tuple[int, int]] | None:
    """got as a list of (slot, request) int pairs, or None if it is not one."""
    if not isinstance(got, (list, tuple)):
        return None
    out = []
    for p in got:
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            return None
        slot, req = as_int(p[0]), as_int(p[1])
        if slot is None or req is None:
            return None
        out.append((slot, req))
    return out


def _fractional(got):
    """The first pair in got that holds a number which is not an int (0.0, say), or None."""
    if not isinstance(got, (list, tuple)):
        return None
    for p in got:
        if isinstance(p, (list, tuple)) and len(p) == 2:
            if all(as_number(x) is not None for x in p) and any(as_int(x) is None for x in p):
                return p
    return None


def _same_pairs(got, want) -> str | None:
    pairs = _pairs(got)
    if pairs is None and (fraction := _fractional(got)) is not None:
        return (
            f"returned pairs such as {shown(fraction)}: slots and requests are whole numbers, ints "
            f"as in the lists given (a division, or float(), made a float)"
        )
    if pairs is None:
        example = want[:2] or [(0, 7), (1, 8)]
        return (
            f"returned {shown_type(got)}: return a list of (slot, request) pairs, such as {example}"
        )
    if pairs == want:
        return None
    if [s for s, _ in pairs] == [s for s, _ in want] and [r for _, r in pairs] == sorted(
        r for _, r in want
    ) != [r for _, r in want]:
        return (
            f"returned {pairs}, expected {want}: you sorted the queue. Requests are served "
            f"first come, first served: the queue's order, not their ids'"
        )
    if pairs == [(r, s) for s, r in want]:
        return f"returned {pairs}, expected {want}: each pair is (slot, request), slot first"
    if len(pairs) != len(want):
        return (
            f"returned {len(pairs)} pairs {pairs}, expected {len(want)}: one pair per "
            f"request admitted, until the free slots or the queue run out"
        )
    slots = [s for s, _ in pairs]
    if [r for _, r in pairs] == [r for _, r in want] and slots != sorted(slots):
        return (
            f"returned {pairs}, expected {want}: you used the free slots in the order given. "
            f"The lowest free slot goes first: sort the free slots, never the queue"
        )
    return f"returned {pairs}, expected {want}"


@checker
def check_admission(fn) -> Verdict:
    """fn(free_slots, queue) → [(slot, request)]: lowest free slot first, queue in order."""
    cases = [
        ([0, 1, 2], [7, 8]),
        ([3, 1], [5, 6, 9]),
        ([], [1]),
        ([0, 2], []),
        ([2], [4, 5]),
        ([5, 0, 3], [9, 4, 7]),  # neither list sorted: sort the slots, never the queue
    ]
    return check_cases(
        fn,
        [((list(f), list(q)), f"free_slots={f}, queue={q}") for f, q in cases],
        lambda free, queue: list(zip(sorted(free), queue)),
        "requests go to the lowest free slots, first come first served",
        _same_pairs,
    )


def _same_slot_mask(got, want) -> str | None:
    problem = same_mask(got, want)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return problem
    empty = (~got.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        r = empty[0]
        return (
            f"returned row {r} = {bits(got[r])}, which attends to no key at all: every slot, "
            f"a free one too, attends at least to its own new key at position lens[b] "
            f"(1 = may attend)"
        )
    return problem


def _explain_mask(error: Exception) -> str | None:
    if isinstance(error, RuntimeError) and "must match the size" in str(error):
        return (
            "lens has one entry per slot and the key positions one per key. Compare "
            "torch.arange(window) with lens[:, None], shape (n_slots, 1): broadcasting then "
            "gives one row per slot, (n_slots, window)"
        )
    return None


@checker
def check_slot_mask(fn) -> Verdict:
    """fn(lens (n_slots,), window) → bool (n_slots, window), SlotKVCache's decode mask."""
    with entered(slot_mask) as ran:
        got = call(fn, (torch.tensor([0, 3, 5]), 8), "lens=[0, 3, 5], window=8", False,
                   CALL_SECONDS, explain=_explain_mask)  # fmt: skip
    if got is FAILED:
        return False
    if ran[slot_mask]:
        return hint(
            "your function calls slot_mask, the package's own answer: this exercise is to "
            "write it. Compare the key positions with each slot's length"
        )
    g = torch.Generator().manual_seed(0)
    cases = [
        ([0, 3, 5], 8),
        ([7], 8),
        ([0, 0], 1),
        (torch.randint(0, 16, (4,), generator=g).tolist(), 16),
    ]
    return check_cases(
        fn,
        [((torch.tensor(lens), w), f"lens={lens}, window={w}") for lens, w in cases],
        slot_mask,
        "your mask is SlotKVCache's: a free slot attends to key 0",
        _same_slot_mask,
        explain=_explain_mask,
    )
