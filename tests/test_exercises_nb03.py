"""tinyllm.course.exercises.nb03: the checkers of notebook 03's exercises (the smallest
bucket, the bucket list, the wasted share as a function, a bucket list of your choice).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import math
import re

import numpy as np
import pytest
import torch
from conftest import (
    assert_hint,
    assert_ok,
    never_returns,
)

from tinyllm.course.exercises import (
    check_bucket_choice,
    check_bucket_for,
    check_default_buckets,
    check_wasted_share,
)
from tinyllm.graphs import bucket_for, default_buckets, wasted_share


def stub(*args):
    raise NotImplementedError


# --- exercise 1: the smallest bucket that fits ----------------------------------------------


def my_bucket_for(n_keys, buckets):
    return min(b for b in buckets if b >= n_keys)


@pytest.mark.parametrize(
    "answer",
    [
        my_bucket_for,
        lambda n, buckets: np.int64(my_bucket_for(n, buckets)),  # numpy's ints are ints
        lambda n, buckets: torch.tensor(my_bucket_for(n, buckets)),  # a 0-d tensor
    ],
    ids=["int", "numpy int", "tensor"],
)
def test_bucket_for_right(answer, capsys):
    with pytest.raises(ValueError):
        my_bucket_for(1025, (128, 256, 512, 1024))
    assert my_bucket_for(129, (128, 256)) == bucket_for(129, (128, 256))
    assert_ok(check_bucket_for, answer, capsys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda n, buckets: next((b for b in buckets if b > n), buckets[-1]), "n_keys=128"),
        (lambda n, buckets: next(i for i, b in enumerate(buckets) if b >= n), "returned 0"),
        (lambda n, buckets: buckets[-1], "n_keys=1,"),
        (lambda n, buckets: float(my_bucket_for(n, buckets)), "(an int)"),
        (lambda n, buckets: my_bucket_for(n, buckets) == 128, "(an int)"),  # True is not 128
        (lambda n, buckets: [my_bucket_for(n, buckets)], "(an int)"),
        (lambda n, buckets: torch.tensor([b for b in buckets if b >= n]), "(an int)"),
    ],
    ids=["> not >=", "an index", "the largest", "a float", "a bool", "a list", "a tensor"],
)
def test_bucket_for_wrong(answer, needle, capsys):
    assert_hint(check_bucket_for, answer, capsys, needle)


def returns_none_past_the_end(n_keys, buckets):
    for b in buckets:
        if b >= n_keys:
            return b


def largest_past_the_end(n_keys, buckets):  # the silent key drop of notebook 04
    return next((b for b in buckets if b >= n_keys), buckets[-1])


def index_error_past_the_end(n_keys, buckets):
    return [b for b in buckets if b >= n_keys][0]


def asserts_past_the_end(n_keys, buckets):
    assert n_keys <= buckets[-1], "too many keys"
    return my_bucket_for(n_keys, buckets)


def never_past_the_end(n_keys, buckets):
    if n_keys > buckets[-1]:
        never_returns()
    return my_bucket_for(n_keys, buckets)


def value_error_past_the_end(n_keys, buckets):
    if n_keys > buckets[-1]:
        raise ValueError(f"{n_keys} keys > largest bucket {buckets[-1]}")
    return next(b for b in buckets if b >= n_keys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (returns_none_past_the_end, "n_keys=1025, buckets=(128, 256, 512, 1024) your function "
         "returned None: no bucket holds 1025 keys, so raise ValueError"),
        (largest_past_the_end, "returned the int 1024: no bucket holds 1025 keys"),
        (index_error_past_the_end, "raised IndexError: no bucket holds 1025 keys"),
        (asserts_past_the_end, "raised AssertionError"),
        (never_past_the_end, "did not finish within 2 s"),
    ],
    ids=["None", "the largest", "IndexError", "assert", "never returns"],
)  # fmt: skip
def test_bucket_for_past_the_last_bucket_must_raise(answer, needle, capsys):
    """Every one of these returns the right bucket wherever one holds the keys."""
    for n in (1, 128, 129, 1024):
        assert answer(n, (128, 256, 512, 1024)) == bucket_for(n, (128, 256, 512, 1024))
    assert_hint(check_bucket_for, answer, capsys, needle)


def test_bucket_for_past_the_last_bucket_raising_value_error_passes(capsys):
    assert_ok(check_bucket_for, value_error_past_the_end, capsys)


# --- exercise 2: the buckets themselves -----------------------------------------------------


def my_default_buckets(max_len, first, growth):
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = max(b + 1, math.ceil(b * growth))
    return (*out, max_len)


def test_default_buckets_right(capsys):
    assert my_default_buckets(1000, 128, 1.5) == default_buckets(1000, 128, 1.5)
    assert_ok(check_default_buckets, my_default_buckets, capsys)
    assert_ok(check_default_buckets, lambda *a: list(my_default_buckets(*a)), capsys)
    assert_ok(
        check_default_buckets, lambda *a: tuple(map(np.int64, my_default_buckets(*a))), capsys
    )


def test_the_guard_never_changes_a_ceiling():
    """max(b + 1, ...) changes nothing next to math.ceil: b * growth > b for every float
    growth > 1 (the product is at least b plus one ulp of b), so no checker case can tell a
    version without it, and the checker accepts one."""
    tiny = math.nextafter(1.0, 2.0)
    for growth in (tiny, 1 + 1e-12, 1.01, 1.3, 2.0):
        assert all(math.ceil(b * growth) > b for b in range(1, 100_000))
    assert ceil_unguarded(1000, 100, 1.3) == default_buckets(1000, 100, 1.3)


def no_ceil(max_len, first, growth):  # floats: 192.0 is not a number of keys
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = max(b + 1, b * growth)
    return (*out, max_len)


def int_round_down(max_len, first, growth):  # int(1 * 1.01) == 1: never ends
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = int(b * growth)
    return (*out, max_len)


def floor_with_guard(max_len, first, growth):  # int() rounds down: ends, but not the buckets
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = max(b + 1, int(b * growth))
    return (*out, max_len)


def round_with_guard(max_len, first, growth):  # round() rounds to nearest
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = max(b + 1, round(b * growth))
    return (*out, max_len)


def round_down_unguarded(max_len, first, growth):  # round(1 * 1.01) == 1: never ends
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = round(b * growth)
    return (*out, max_len)


def ceil_unguarded(max_len, first, growth):  # the same buckets: b * growth > b, for growth > 1
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = math.ceil(b * growth)
    return (*out, max_len)


def twice_max_len(max_len, first, growth):
    out, b = [], first
    while b <= max_len:
        out.append(b)
        b = max(b + 1, math.ceil(b * growth))
    return (*out, max_len)


def no_max_len(max_len, first, growth):
    out, b = [], first
    while b < max_len:
        out.append(b)
        b = max(b + 1, math.ceil(b * growth))
    return tuple(out)


def powers(max_len, first, growth):
    return tuple(first * 2**i for i in range(5))


def first_always(max_len, first, growth):  # "first, then ...": first even when max_len <= first
    out, b = [first], math.ceil(first * growth)
    while b < max_len:
        out.append(b)
        b = math.ceil(b * growth)
    return (*out, max_len)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (no_ceil, "math.ceil returns an int"),
        (int_round_down, "did not end within 2 s"),
        (floor_with_guard, "int() rounds down; round up, with math.ceil"),
        (round_with_guard, "round() rounds to nearest; round up, with math.ceil"),
        (round_down_unguarded, "did not end within 2 s"),
        (twice_max_len, "max_len is a bucket once"),
        (no_max_len, "the last bucket is always max_len"),
        (powers, "expected (128, 256, 512, 1024)"),
        (
            first_always,
            "max_len=100, first=128, growth=2 your function returned (128, 100), expected "
            "(100,): only buckets below max_len are kept, first included",
        ),
        (lambda *a: my_default_buckets(*a)[:-1] + (True,), "holding the bool True"),
        (lambda *a: np.array(my_default_buckets(*a)), "expected a tuple of ints"),
        (lambda *a: set(my_default_buckets(*a)), "expected a tuple of ints"),
        (lambda *a: dict.fromkeys(my_default_buckets(*a)), "expected a tuple of ints"),
        (lambda *a: default_buckets(*a), "graphs.default_buckets"),
        (lambda *a: tuple(default_buckets(*a)), "write it yourself"),
    ],
    ids=[
        "no ceil",
        "int()",
        "int() and the guard",
        "round() and the guard",
        "round()",
        "max_len twice",
        "no max_len",
        "powers",
        "first always",
        "a bool",
        "numpy",
        "a set",
        "a dict",
        "the package's own",
        "the package's own, as a tuple",
    ],
)
def test_default_buckets_wrong(answer, needle, capsys):
    assert_hint(check_default_buckets, answer, capsys, needle)


# --- exercise 3: the wasted share -----------------------------------------------------------


def my_wasted_share(buckets, max_len):
    windows = [my_bucket_for(n, buckets) for n in range(1, max_len + 1)]
    return sum(w - n for n, w in enumerate(windows, 1)) / sum(windows)


@pytest.mark.parametrize(
    "answer",
    [
        my_wasted_share,
        lambda b, m: torch.tensor(my_wasted_share(b, m), dtype=torch.float64),
        lambda b, m: np.float64(my_wasted_share(b, m)),
        lambda b, m: torch.tensor(my_wasted_share(b, m)),  # float32: right to its 7 digits
        lambda b, m: np.float32(my_wasted_share(b, m)),
    ],
    ids=["float", "tensor", "numpy", "float32 tensor", "numpy float32"],
)
def test_wasted_share_right(answer, capsys):
    assert my_wasted_share((64, 256, 1024), 1024) == pytest.approx(
        wasted_share((64, 256, 1024), 1024)
    )
    assert_ok(check_wasted_share, answer, capsys)


def over_needed(buckets, max_len):  # divides by the keys needed, not by the work done
    windows = [bucket_for(n, buckets) for n in range(1, max_len + 1)]
    return sum(w - n for n, w in enumerate(windows, 1)) / sum(range(1, max_len + 1))


def from_zero(buckets, max_len):  # n = 0..max_len-1: one key short at every step
    windows = [bucket_for(max(n, 1), buckets) for n in range(max_len)]
    return sum(w - n for n, w in zip(range(max_len), windows)) / sum(windows)


def off_by_1e6(buckets, max_len):  # a millionth off: past the tolerance
    return my_wasted_share(buckets, max_len) + 1e-6


def float16(buckets, max_len):  # three significant digits
    return torch.tensor(my_wasted_share(buckets, max_len), dtype=torch.float16)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda b, m: 100 * my_wasted_share(b, m), "a percentage"),
        (lambda b, m: 1 - my_wasted_share(b, m), "the useful share"),
        (over_needed, "divides by the keys needed"),
        (from_zero, "sum (window - n) over every"),
        (off_by_1e6, "returned 0.250001, expected 0.25"),
        (float16, "returned a torch.float16 tensor 0.25"),
        (lambda b, m: my_wasted_share(b, m) > 0.3, "expected a share between 0 and 1"),
        (lambda b, m: f"{my_wasted_share(b, m):.3f}", "expected a share between 0 and 1"),
        (lambda b, m: [my_wasted_share(b, m)], "expected a share between 0 and 1"),
    ],
    ids=[
        "percent",
        "useful",
        "over needed",
        "from 0",
        "off",
        "float16",
        "a bool",
        "a str",
        "a list",
    ],
)
def test_wasted_share_wrong(answer, needle, capsys):
    out = assert_hint(check_wasted_share, answer, capsys, needle)
    m = re.search(r"returned (?:a [\w.]+ tensor )?([\d.]+)\D.*expected ([\d.]+)", out)
    assert m is None or m.group(1) != m.group(2), f"two equal numbers: {out}"


def test_a_float16_share_is_named_and_its_digits_differ(capsys):
    """A float16 share agrees with the right one to 3 digits: the hint names the dtype and
    prints as many digits as it takes to tell the two apart."""
    buckets = (128, 256, 512, 1000)  # the first case where float16 is not exact
    want = wasted_share(buckets, 1000)
    half = float(float16(buckets, 1000))
    assert f"{half:.3g}" == f"{want:.3g}" and half != want
    out = assert_hint(check_wasted_share, float16, capsys, f"buckets={buckets}")
    assert "torch.float16 tensor" in out and "about 3 significant digits" in out


# --- exercise 4: choose the buckets ---------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        (256, 512, 768, 1024),
        [384, 576, 864, 1024],
        default_buckets(1024, 384, 1.5),
        (1024, 768, 256, 512),
    ],
)
def test_bucket_choice_right(answer, capsys):
    assert wasted_share(tuple(sorted(answer)), 1024) < 0.22 and len(answer) <= 4
    assert_ok(check_bucket_choice, answer, capsys)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (default_buckets(1024), "look at where the top buckets sit"),
        (default_buckets(1024, 128, 1.5), "at most 4 graphs are allowed"),
        ((256, 512, 768), "must end at max_len"),
        ((256, 512, 768, 2048), "must end at max_len"),
        ((0, 512, 1024), "positive ints"),
        ((), "1 to 64 windows"),
        ((256.0, 512.0, 768.0, 1024.0), "a tuple of ints"),
        ((256, 512, True, 1024), "a tuple of ints"),
        (1024, "a tuple of ints"),
    ],
    ids=[
        "default",
        "too many",
        "no max_len",
        "past max_len",
        "zero",
        "empty",
        "floats",
        "a bool",
        "an int",
    ],
)
def test_bucket_choice_wrong(answer, needle, capsys):
    assert_hint(check_bucket_choice, answer, capsys, needle)


@pytest.mark.parametrize(
    "answer, needle",
    [
        ((256, 512, 512, 1024), "buckets (256, 512, 512, 1024) hold 512 more than once"),
        ((256, 256, 512, 768, 1024), "hold 256 more than once"),  # 4 windows, 5 graphs
        ((1024, 768, 1024, 768), "hold 768, 1024 more than once"),
    ],
    ids=["one twice", "five with a duplicate", "two twice"],
)
def test_bucket_choice_duplicates_are_named(answer, needle, capsys):
    """A duplicate is not dropped without a word: the hint names it."""
    assert_hint(check_bucket_choice, answer, capsys, needle, "list each window once")


def test_bucket_choice_unanswered_names_the_cells_variable(capsys):
    """The exercise cell is `answer = None  # your buckets here`: the hint names `answer`."""
    assert_hint(check_bucket_choice, None, capsys, "set answer to a tuple")


@pytest.mark.parametrize(
    "answer", [(np.int64(256), 512, torch.tensor(768), 1024), np.array([256, 512, 768, 1024])]
)
def test_bucket_choice_integer_types(answer, capsys):
    if isinstance(answer, np.ndarray):  # a tuple, as the exercise asks
        assert_hint(check_bucket_choice, answer, capsys, "a tuple of ints")
    else:
        assert_ok(check_bucket_choice, answer, capsys)


# --- wrong types, stubs and crashes, for every function exercise -----------------------------

FUNCTION_CHECKS = {
    "bucket_for": check_bucket_for,
    "default_buckets": check_default_buckets,
    "wasted_share": check_wasted_share,
}
