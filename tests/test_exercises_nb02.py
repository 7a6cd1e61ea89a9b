"""tinyllm.course.exercises.nb02: the checkers of notebook 02's exercises (the window mask,
the graph-safe write at pos).

A checker accepts the right answer, answers every wrong one with one [HINT] line (never a
traceback, never a false [OK]), and catches every host read of pos, however it is written.
"""

import ctypes
import functools

import pytest
import torch
from conftest import (
    assert_hint,
    assert_ok,
    raising,
    returning,
)

from tinyllm.course.exercises import check_static_write, check_window_mask
from tinyllm.kv_cache import window_mask


def stub(*args):
    raise NotImplementedError


# --- exercise 1: the window mask -------------------------------------------------------------


def my_window_mask(pos, window, first_valid):
    k = torch.arange(window)
    return (k <= pos) & (k >= first_valid[:, None])


def keys_attended(keys, pos, first_valid):  # a helper of the learner's, without a loop
    return (keys <= pos) & (keys >= first_valid[:, None])


def with_a_helper(pos, window, first_valid):
    with torch.no_grad():  # a with, a try and a conditional: no loop
        try:
            keys = torch.arange(window) if window > 0 else None
        finally:
            pass
    return keys_attended(keys, pos, first_valid)


def with_where(pos, window, first_valid):
    keys = torch.arange(window)[None]
    return torch.where(keys >= first_valid[:, None], keys <= pos, False)


@pytest.mark.parametrize(
    "answer",
    [my_window_mask, with_a_helper, with_where, functools.partial(my_window_mask)],
    ids=["broadcast", "a helper", "where", "a partial"],
)
def test_window_mask_right(answer, capsys):
    assert torch.equal(
        my_window_mask(9, 16, torch.tensor([0, 3, 5])), window_mask(9, 16, [0, 3, 5])
    )
    assert_ok(check_window_mask, answer, capsys)


def rows_in_a_for(pos, window, first_valid):
    mask = torch.zeros(len(first_valid), window, dtype=torch.bool)
    for b, f in enumerate(first_valid.tolist()):
        mask[b, f : pos + 1] = True
    return mask


def rows_in_a_while(pos, window, first_valid):
    mask, b = torch.zeros(len(first_valid), window, dtype=torch.bool), 0
    while b < len(first_valid):
        mask[b, int(first_valid[b]) : pos + 1] = True
        b += 1
    return mask


def rows_in_a_comprehension(pos, window, first_valid):
    keys = torch.arange(window)
    return torch.stack([(keys <= pos) & (keys >= f) for f in first_valid])


def rows_in_a_generator(pos, window, first_valid):
    keys = torch.arange(window)
    return torch.stack(tuple((keys <= pos) & (keys >= f) for f in first_valid))


def looping_helper(pos, window, first_valid):
    return rows_in_a_comprehension(pos, window, first_valid)


def nested_loop(pos, window, first_valid):
    def rows():
        return [[int(f) <= k <= pos for k in range(window)] for f in first_valid]

    return torch.tensor(rows())


class LoopingCallable:
    def __call__(self, pos, window, first_valid):
        return rows_in_a_for(pos, window, first_valid)


LOOPS = {  # every one of these returns the right mask, with a Python loop
    "for": (rows_in_a_for, "rows_in_a_for runs a Python loop"),
    "while": (rows_in_a_while, "rows_in_a_while runs a Python loop"),
    "comprehension": (rows_in_a_comprehension, "a comprehension"),
    "generator": (rows_in_a_generator, "rows_in_a_generator"),
    "in a helper": (looping_helper, "rows_in_a_comprehension runs"),
    "nested def": (nested_loop, "nested_loop runs"),
    "callable object": (LoopingCallable(), "rows_in_a_for runs"),
    "lambda": (
        lambda pos, w, fv: torch.stack([window_mask(pos, w, [f])[0] for f in fv.tolist()]),
        "<lambda> runs",
    ),
}


@pytest.mark.parametrize("case", LOOPS)
def test_window_mask_with_a_loop_gets_a_hint(case, capsys):
    """The exercise asks for tensor operations, not loops: a loop is named, though its mask
    is right."""
    answer, needle = LOOPS[case]
    assert torch.equal(answer(9, 16, torch.tensor([0, 3, 5])), window_mask(9, 16, [0, 3, 5]))
    assert_hint(check_window_mask, answer, capsys, needle, "torch.arange")


def rows_by_map(pos, window, first_valid):  # the lambda runs once per row; no loop in sight
    keys = torch.arange(window)
    return torch.stack(list(map(lambda f: (keys <= pos) & (keys >= f), first_valid)))


def rows_by_recursion(pos, window, first_valid):  # one call per row
    if len(first_valid) == 0:
        return torch.zeros(0, window, dtype=torch.bool)
    keys = torch.arange(window)
    row = (keys <= pos) & (keys >= first_valid[0])
    return torch.cat([row[None], rows_by_recursion(pos, window, first_valid[1:])])


def rows_by_reduce(pos, window, first_valid):
    keys = torch.arange(window)
    add_row = lambda m, f: torch.cat([m, ((keys <= pos) & (keys >= f))[None]])  # noqa: E731
    return functools.reduce(add_row, first_valid, torch.zeros(0, window, dtype=torch.bool))


def keys_by_recursion(pos, window, first_valid, k=0):  # one call per key
    if k == window:
        return torch.zeros(len(first_valid), 0, dtype=torch.bool)
    column = (first_valid <= k) & (k <= pos)
    return torch.cat([column[:, None], keys_by_recursion(pos, window, first_valid, k + 1)], 1)


def compare(a, b):  # a helper called twice, whatever the input: no iteration
    return a >= b


def a_helper_twice(pos, window, first_valid):
    keys = torch.arange(window)
    return compare(pos, keys) & compare(keys, first_valid[:, None])


ITERATION = {  # every one of these returns the right mask, iterating in Python without a loop
    "map with a lambda": (rows_by_map, "rows_by_map.<locals>.<lambda> ran 2 times on 2 rows"),
    "recursion over rows": (rows_by_recursion, "rows_by_recursion ran 3 times on 2 rows"),
    "functools.reduce": (rows_by_reduce, "rows_by_reduce.<locals>.<lambda> ran 2 times"),
    "recursion over keys": (keys_by_recursion, "of 8 keys and 17 times on 6 rows of 16 keys"),
}


@pytest.mark.parametrize("case", ITERATION)
def test_window_mask_iterating_without_a_loop_gets_a_hint(case, capsys):
    """map(lambda ...) and recursion run Python once per row or key, with no loop in the
    bytecode: the checker sees the calls grow with the input."""
    answer, needle = ITERATION[case]
    assert torch.equal(answer(9, 16, torch.tensor([0, 3, 5])), window_mask(9, 16, [0, 3, 5]))
    assert_hint(check_window_mask, answer, capsys, needle, "Python iterating", "torch.arange")


def test_window_mask_helper_called_a_fixed_number_of_times_passes(capsys):
    assert_ok(check_window_mask, a_helper_twice, capsys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda pos, w, fv: torch.arange(w)[None].expand(len(fv), -1) <= pos, "row"),  # no pads
        (lambda pos, w, fv: (torch.arange(w) < pos) & (torch.arange(w) >= fv[:, None]), "row"),
        (lambda pos, w, fv: (torch.arange(w) <= pos) & (torch.arange(w) > fv[:, None]), "row"),
        (
            lambda pos, w, fv: ((torch.arange(w) <= pos) & (torch.arange(w) >= fv[:, None])).int(),
            "expected a bool tensor",
        ),
        (lambda pos, w, fv: (torch.arange(w) <= pos) & (torch.arange(w) >= fv), "shape"),
        (
            lambda pos, w, fv: ((torch.arange(w) <= pos) & (torch.arange(w) >= fv[:, None]))[
                :, None, None
            ],
            "shape",
        ),
        (
            lambda pos, w, fv: (
                (torch.arange(w) <= pos) & (torch.arange(w) >= fv[:, None])
            ).tolist(),
            "expected a bool tensor",
        ),
    ],
    ids=["pads ignored", "< pos", "> first_valid", "int mask", "no broadcast", "4-d", "a list"],
)
def test_window_mask_wrong(answer, needle, capsys):
    assert_hint(check_window_mask, answer, capsys, needle)


# --- exercise 2: the graph-safe write --------------------------------------------------------


def index_copy(cache_k, k_new, pos):
    cache_k.index_copy_(2, pos, k_new)


def tensor_index(cache_k, k_new, pos):
    cache_k[:, :, pos] = k_new  # advanced indexing with the tensor: no host read


def where(cache_k, k_new, pos):
    at = torch.arange(cache_k.shape[2], device=cache_k.device) == pos
    cache_k.copy_(torch.where(at[:, None], k_new, cache_k))


def scatter(cache_k, k_new, pos):
    B, H, _, D = cache_k.shape
    cache_k.scatter_(2, pos.view(1, 1, 1, 1).expand(B, H, 1, D), k_new)


@pytest.mark.parametrize("answer", [index_copy, tensor_index, where, scatter])
def test_static_write_right(answer, capsys):
    assert_ok(check_static_write, answer, capsys)


def item(cache_k, k_new, pos):
    cache_k[:, :, pos.item()] = k_new[:, :, 0]


def as_int(cache_k, k_new, pos):
    cache_k[:, :, int(pos)] = k_new[:, :, 0]


def first_element(cache_k, k_new, pos):
    cache_k[:, :, pos[0]] = k_new[:, :, 0]  # a 0-d tensor as an index: torch calls .item()


def as_numpy(cache_k, k_new, pos):
    cache_k[:, :, pos.numpy()] = k_new


def as_list(cache_k, k_new, pos):
    cache_k[:, :, pos.tolist()] = k_new


def if_equal(cache_k, k_new, pos):
    for p in range(cache_k.shape[2]):
        if p == pos:
            cache_k[:, :, p] = k_new[:, :, 0]


def a_slice(cache_k, k_new, pos):
    cache_k[:, :, pos : pos + 1] = k_new


def printed(cache_k, k_new, pos):
    print(f"writing at {pos}")
    cache_k.index_copy_(2, pos, k_new)


def caught_read(cache_k, k_new, pos):
    try:
        p = int(pos)
    except RuntimeError:  # the refused read, swallowed: the capture still fails
        p = 0
    cache_k[:, :, p] = k_new[:, :, 0]


def to_host(cache_k, k_new, pos):
    cache_k.index_copy_(2, pos.cpu(), k_new)


def to_cpu_and_back(cache_k, k_new, pos):  # on a CPU the same tensor: only meta tells
    cache_k.index_copy_(2, pos.to("cpu").to(cache_k.device), k_new)


def host_arange(cache_k, k_new, pos):
    at = torch.arange(cache_k.shape[2]) == pos  # made on the CPU: on a GPU, two devices
    cache_k.copy_(torch.where(at[:, None], k_new, cache_k))


@pytest.mark.parametrize(
    "answer, needle",
    [
        (item, "reads pos on the host (int(pos), pos.item()"),
        (as_int, "reads pos on the host (int(pos)"),
        (first_element, "reads pos on the host (int(pos), pos.item(), pos[0]"),
        (as_numpy, "reads pos on the host (pos.numpy())"),
        (as_list, "reads pos on the host (pos.tolist())"),
        (if_equal, "reads pos on the host"),
        (a_slice, "reads pos on the host"),
        (printed, "reads pos on the host (printing or formatting pos)"),
        (caught_read, "reads pos on the host"),
        (to_host, "pos.cpu(), a copy to the host"),
        (to_cpu_and_back, 'copies a tensor to the host (.to("cpu")'),
        (host_arange, "device=cache_k.device"),
    ],
    ids=lambda x: getattr(x, "__name__", "")[:20] if callable(x) else "",
)
def test_static_write_host_reads_are_caught(answer, needle, capsys):
    """Every one of these writes the right values on a CPU: only the host read is wrong."""
    cache_k, k_new = torch.randn(2, 2, 12, 4), torch.randn(2, 2, 1, 4)
    want = cache_k.clone()
    want[:, :, 5] = k_new[:, :, 0]
    answer(cache_k, k_new, torch.tensor([5]))
    capsys.readouterr()
    assert torch.equal(cache_k, want)
    assert_hint(check_static_write, answer, capsys, needle)


def not_in_place(cache_k, k_new, pos):
    return cache_k.index_copy(2, pos, k_new)


def rebinds(cache_k, k_new, pos):
    cache_k = cache_k.clone()
    cache_k.index_copy_(2, pos, k_new)


def next_position(cache_k, k_new, pos):
    cache_k.index_copy_(2, (pos + 1) % cache_k.shape[2], k_new)


def zeros(cache_k, k_new, pos):
    cache_k.index_fill_(2, pos, 0.0)


def advances_pos(cache_k, k_new, pos):
    cache_k.index_copy_(2, pos, k_new)
    pos.add_(1)


def every_position(cache_k, k_new, pos):
    cache_k.copy_(k_new.expand_as(cache_k))


@pytest.mark.parametrize(
    "answer, needle",
    [
        (not_in_place, "cache_k is unchanged"),
        (rebinds, "cache_k is unchanged"),
        (returning(None), "cache_k is unchanged"),
        (next_position, "changed position(s) [1]"),
        (zeros, "position 0 holds wrong values"),
        (every_position, "k_new belongs at position 0 alone"),
        (advances_pos, "your function changed pos to [1]"),
        (stub, "not solved yet"),
        (raising, "ZeroDivisionError"),
    ],
    ids=[
        "not in place",
        "rebinds",
        "returns None",
        "pos + 1",
        "zeros",
        "everywhere",
        "advances pos",
        "stub",
        "raises",
    ],
)
def test_static_write_wrong(answer, needle, capsys):
    assert_hint(check_static_write, answer, capsys, needle)


def test_static_write_replay_follows_pos(capsys):
    """A host read that torch cannot see (through the raw address) passes capture, and a
    graph of it writes at replay where the position was at capture: the replayed graph is
    checked at another position."""

    def hidden_read(cache_k, k_new, pos):
        if pos.device.type != "cpu":
            raise RuntimeError("no host address")
        p = ctypes.c_int64.from_address(pos.data_ptr()).value
        cache_k[:, :, p] = k_new[:, :, 0]

    assert_hint(check_static_write, hidden_read, capsys, "replayed with pos=7", "wrote at [0]")


def test_window_mask_that_calls_the_package_s_own_gets_a_hint(capsys):
    assert_hint(check_window_mask, lambda p, w, f: window_mask(p, w, f), capsys,
                "kv_cache.window_mask", "write it yourself")  # fmt: skip


def test_window_mask_that_cannot_be_compared(capsys):
    """A mask on another device cannot even be compared: a hint, not a traceback."""
    on_meta = lambda pos, w, fv: my_window_mask(pos, w, fv).to("meta")  # noqa: E731
    assert_hint(check_window_mask, on_meta, capsys, "on meta", "not the kind of answer")
