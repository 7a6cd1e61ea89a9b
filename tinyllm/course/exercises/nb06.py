"""Checkers of notebook 06 · continuous batching."""

import torch

from tinyllm.course.exercises.harness import check_cases, equal, same_mask
from tinyllm.kv_cache import slot_mask


def check_admission(fn) -> bool:
    """fn(free_slots, queue) → [(slot, request)]: lowest free slot first, queue in order."""
    cases = [([0, 1, 2], [7, 8]), ([3, 1], [5, 6, 9]), ([], [1]), ([0, 2], []), ([2], [4, 5])]
    return check_cases(
        fn,
        [((list(f), list(q)), f"free_slots={f}, queue={q}") for f, q in cases],
        lambda free, queue: list(zip(sorted(free), queue)),
        "requests go to the lowest free slots, first come first served",
        lambda got, want: equal([tuple(p) for p in got], want),
    )


def check_slot_mask(fn) -> bool:
    """fn(lens (n_slots,), window) → bool (n_slots, window), SlotKVCache's decode mask."""
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
        same_mask,
    )
