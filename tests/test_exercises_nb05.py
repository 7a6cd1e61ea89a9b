"""tinyllm.course.exercises.nb05: the checkers of notebook 05's exercises (the first
difference, bit for bit; the top-1 minus top-2 margin).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import numpy as np
import pytest
import torch
from conftest import assert_hint, assert_ok, raising

from tinyllm.course.exercises import check_first_difference, check_flip_margin


def stub(*args):
    raise NotImplementedError


# --- exercise 1: the first difference -------------------------------------------------------


def my_first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if not torch.equal(x, y):
            return i
    return None


@pytest.mark.parametrize(
    "answer",
    [
        my_first_difference,
        lambda a, b: next((i for i, (x, y) in enumerate(zip(a, b)) if (x != y).any()), None),
        lambda a, b: next(
            (np.int64(i) for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)), None
        ),
    ],
    ids=["torch.equal", "any !=", "numpy int"],
)
def test_first_difference_right(answer, capsys):
    assert_ok(check_first_difference, answer, capsys)


def allclose(a, b):  # hides the very differences the notebook is about
    return next((i for i, (x, y) in enumerate(zip(a, b)) if not torch.allclose(x, y)), None)


def last(a, b):
    found = None
    for i, (x, y) in enumerate(zip(a, b)):
        if not torch.equal(x, y):
            found = i
    return found


def one_based(a, b):
    i = my_first_difference(a, b)
    return None if i is None else i + 1


def as_bool(a, b):
    return my_first_difference(a, b) is not None


def minus_one(a, b):  # -1 for "none", as str.find does
    i = my_first_difference(a, b)
    return -1 if i is None else i


def as_float(a, b):
    i = my_first_difference(a, b)
    return None if i is None else float(i)


def tensor_if(a, b):  # `if x != y` on a tensor of many elements is ambiguous: it raises
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


def whole_lists(a, b):
    return None if torch.equal(a, b) else 0


@pytest.mark.parametrize(
    "answer, needle",
    [
        (allclose, "one float ulp apart at step 3 only your function returned None"),
        (last, "differ at steps 1 and 3 your function returned 3, expected 1"),
        (one_based, "steps count from 0"),
        (as_bool, "returned the bool False"),
        (minus_one, "expected None"),
        (as_float, "(an int)"),
        (tensor_if, "RuntimeError"),
        (whole_lists, "TypeError"),
        (stub, "not solved yet"),
        (raising, "ZeroDivisionError"),
    ],
    ids=[
        "allclose",
        "last",
        "1-based",
        "a bool",
        "-1",
        "a float",
        "tensor if",
        "lists",
        "stub",
        "raises",
    ],
)
def test_first_difference_wrong(answer, needle, capsys):
    assert_hint(check_first_difference, answer, capsys, needle)


def test_false_is_not_step_0(capsys):
    """False == 0 in Python: a checker comparing with == would pass it as step 0."""
    assert_hint(check_first_difference, lambda a, b: False if a[0] is not b[0] else None, capsys)


# --- exercise 2: the margin -----------------------------------------------------------------


def my_flip_margin(logits):
    top2 = logits.topk(2, dim=-1).values
    return top2[:, 0] - top2[:, 1]


@pytest.mark.parametrize(
    "answer",
    [
        my_flip_margin,
        lambda x: (lambda s: s[:, 0] - s[:, 1])(x.sort(dim=-1, descending=True).values),
        lambda x: my_flip_margin(x).double(),
    ],
    ids=["topk", "sort", "float64"],
)
def test_flip_margin_right(answer, capsys):
    assert_ok(check_flip_margin, answer, capsys)


def second_distinct(logits):  # the gap to the next distinct value: a tie is not 0
    out = []
    for row in logits:
        u = row.unique(sorted=True)
        out.append(u[-1] - u[-2] if len(u) > 1 else torch.tensor(0.0))
    return torch.stack(out)


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda x: x.max(dim=-1).values - x.min(dim=-1).values, "expected"),
        (lambda x: -my_flip_margin(x), "top-2 minus top-1"),
        (lambda x: my_flip_margin(x).abs() + 1e-3, "expected"),
        (second_distinct, "a tie [[1, 1, 0]]"),
        (lambda x: (lambda s: s[:, 0] - s[:, 1])(x.sort(dim=-1).values), "expected"),
        (lambda x: my_flip_margin(x.T), "expected a tensor of shape (3,)"),
        (lambda x: my_flip_margin(x)[:, None], "expected a tensor of shape (3,)"),
        (lambda x: my_flip_margin(x).tolist(), "expected a tensor of shape (3,)"),
        (lambda x: my_flip_margin(x) > 0, "as floats"),
        (lambda x: my_flip_margin(x.softmax(-1)), "expected"),
        (stub, "not solved yet"),
        (raising, "ZeroDivisionError"),
    ],
    ids=[
        "max - min",
        "negative",
        "off",
        "distinct",
        "ascending",
        "per column",
        "(B, 1)",
        "a list",
        "a bool tensor",
        "probabilities",
        "stub",
        "raises",
    ],
)
def test_flip_margin_wrong(answer, needle, capsys):
    assert_hint(check_flip_margin, answer, capsys, needle)


@pytest.mark.parametrize(
    "answer, dtype",
    [
        (lambda x: my_flip_margin(x).half(), "torch.float16"),
        (lambda x: my_flip_margin(x.half()), "torch.float16"),
        (lambda x: my_flip_margin(x.bfloat16()), "torch.bfloat16"),
    ],
    ids=["cast after", "half logits", "bf16 logits"],
)
def test_flip_margin_in_a_coarser_dtype_names_it(answer, dtype, capsys):
    """Rounded to 4 decimals, float16 margins print as the float32 ones: the hint must say
    what differs (the dtype), with digits enough to tell the two values apart."""
    out = assert_hint(check_flip_margin, answer, capsys, dtype, "significant digits", "float32")
    got, want = out.split("row ")[1].split(")")[0].split(": ")[1].split(", expected ")
    assert got != want, out


def test_flip_margin_nearly_right_shows_two_different_numbers(capsys):
    out = assert_hint(check_flip_margin, lambda x: my_flip_margin(x) + 1e-5, capsys, "row ")
    got, want = out.split(" = ")[1].strip().split(", expected ")
    assert got != want, out


def top_masked_in_place(logits):  # the top logit set to -inf in the caller's own tensor
    top = logits.max(-1)
    first = top.values.clone()
    logits.scatter_(1, top.indices[:, None], float("-inf"))
    return first - logits.max(-1).values


def cleared(a, b):  # the right step, then the caller's list emptied
    step = next((i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)), None)
    a.clear()
    return step


def test_flip_margin_that_changes_the_logits_gets_a_hint(capsys):
    assert_hint(check_flip_margin, top_masked_in_place, capsys, "changed its input in place",
                ".clone()")  # fmt: skip


def test_first_difference_that_changes_its_lists_gets_a_hint(capsys):
    assert_hint(check_first_difference, cleared, capsys, "changed its input in place")
