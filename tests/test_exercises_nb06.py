"""tinyllm.course.exercises.nb06: the checkers of notebook 06's exercises (admission into
free slots, the slot mask).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import itertools

import pytest
import torch
from conftest import assert_hint, assert_ok, raising

from tinyllm import Engine
from tinyllm.course.exercises import check_admission, check_slot_mask
from tinyllm.kv_cache import SlotKVCache, slot_mask


def stub(*args):
    raise NotImplementedError


# --- exercise 1: admission ------------------------------------------------------------------


def my_admission(free_slots, queue):
    return list(zip(sorted(free_slots), queue))


def test_admission_is_the_engines(toy_model):
    """The reference is what Engine.admit does: lowest free slot, first request first."""
    assert SlotKVCache(1, 3, 8, "cpu").free_slots() == [0, 1, 2]
    engine = Engine(toy_model, n_slots=3, max_len=32, use_graph=False)
    rids = [engine.submit([1, 2, 3], 4) for _ in range(2)]
    free = engine.slots.free_slots()
    engine.admit()
    assert sorted((s, r.rid) for s, r in engine.running.items()) == my_admission(free, rids)


@pytest.mark.parametrize(
    "answer",
    [
        my_admission,
        lambda free, queue: tuple(zip(sorted(free), queue)),
        lambda free, queue: [[s, r] for s, r in zip(sorted(free), queue)],
    ],
    ids=["list of tuples", "tuple", "list of lists"],
)
def test_admission_right(answer, capsys):
    assert_ok(check_admission, answer, capsys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda free, queue: list(zip(free, queue)), "free_slots=[3, 1]"),
        (lambda free, queue: list(zip(sorted(free), sorted(queue))), "queue=[9, 4, 7]"),
        (lambda free, queue: list(zip(sorted(free, reverse=True), queue)), "expected"),
        (lambda free, queue: list(zip(sorted(free), reversed(queue))), "expected"),
        (lambda free, queue: [(r, s) for s, r in zip(sorted(free), queue)], "slot first"),
        (lambda free, queue: list(itertools.zip_longest(sorted(free), queue)), "pairs"),
        (lambda free, queue: dict(zip(sorted(free), queue)), "(slot, request) pairs"),
        (lambda free, queue: [s for s, _ in zip(sorted(free), queue)], "(slot, request) pairs"),
        (lambda free, queue: zip(sorted(free), queue), "(slot, request) pairs"),
        (lambda free, queue: [(float(s), r) for s, r in zip(sorted(free), queue)], "ints"),
        (lambda free, queue: [(s, r / 1) for s, r in zip(sorted(free), queue)], "whole numbers"),
        (stub, "not solved yet"),
        (raising, "ZeroDivisionError"),
    ],
    ids=[
        "unsorted slots",
        "sorted queue",
        "highest slot",
        "last request",
        "swapped",
        "zip_longest",
        "a dict",
        "flat list",
        "a zip",
        "float slots",
        "float requests",
        "stub",
        "raises",
    ],
)
def test_admission_wrong(answer, needle, capsys):
    assert_hint(check_admission, answer, capsys, needle)


# --- exercise 2: the slot mask --------------------------------------------------------------


def my_slot_mask(lens, window):
    return torch.arange(window) <= lens[:, None]


def test_slot_mask_right(capsys):
    assert torch.equal(my_slot_mask(torch.tensor([0, 3]), 8), slot_mask([0, 3], 8))
    assert_ok(check_slot_mask, my_slot_mask, capsys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda lens, w: torch.arange(w) < lens[:, None], "attends to no key at all"),
        (
            lambda lens, w: (torch.arange(w) <= lens[:, None]) & (lens[:, None] > 0),
            "attends to no key at all",
        ),
        (lambda lens, w: torch.arange(w) <= lens[:, None] + 1, "1 = may attend"),
        (lambda lens, w: torch.arange(w) <= lens, "lens[:, None]"),
        (lambda lens, w: (torch.arange(w) <= lens[:, None]).float(), "expected a bool tensor"),
        (
            lambda lens, w: torch.where(torch.arange(w) <= lens[:, None], 0.0, float("-inf")),
            "expected a bool tensor",
        ),
        (lambda lens, w: (torch.arange(w) <= lens[:, None])[:, None, None], "shape"),
        (stub, "not solved yet"),
        (raising, "ZeroDivisionError"),
    ],
    ids=[
        "< lens",
        "free slots empty",
        "one too many",
        "no broadcast",
        "float",
        "additive",
        "4-d",
        "stub",
        "raises",
    ],
)
def test_slot_mask_wrong(answer, needle, capsys):
    assert_hint(check_slot_mask, answer, capsys, needle)


# --- wrong types ----------------------------------------------------------------------------


def test_admission_with_the_free_slots_in_the_order_given_is_told_to_sort_them(capsys):
    assert_hint(check_admission, lambda free, queue: list(zip(free, queue)), capsys,
                "in the order given", "sort the free slots")  # fmt: skip
