"""Checkers of notebook 05 · bit exactness."""

import math

import torch

from tinyllm.course.exercises.harness import (
    Verdict,
    as_int,
    check_cases,
    checker,
    digits,
    shown_type,
)


def _first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)), None)


def _same_step(got, want) -> str | None:
    """The step index (an int, never a bool) or None, exactly."""
    if want is None:
        if got is None:
            return None
        return f"returned {shown_type(got)}, expected None: no step differs"
    if got is None:
        return f"returned None, expected {want}: a step differs"
    if as_int(got) is None:
        return f"returned {shown_type(got)}, expected the step index {want} (an int)"
    if as_int(got) == want + 1:
        return f"returned {as_int(got)}, expected {want}: steps count from 0, as list indices do"
    return None if as_int(got) == want else f"returned {as_int(got)}, expected {want}"


@checker
def check_first_difference(fn) -> Verdict:
    """fn(a_logits_list, b_logits_list) → first step index where not torch.equal, or None."""
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(2, 5, generator=g) for _ in range(4)]
    ulp = [x.clone() for x in a]
    ulp[3][1, 2] = torch.nextafter(a[3][1, 2], torch.tensor(math.inf))  # one ulp apart
    first = [x.clone() for x in a]
    first[0] += 1
    two = [x.clone() for x in a]
    two[1][0, 0] += 1e-3
    two[3][1, 4] -= 5.0
    cases = [
        ((a, [x.clone() for x in a]), "identical lists"),
        ((a, first), "lists that differ from step 0"),
        ((a, two), "lists that differ at steps 1 and 3"),
        ((a, ulp), "lists one float ulp apart at step 3 only"),
    ]
    return check_cases(
        fn, cases, _first_difference, "bit for bit: even one unit in the last place counts",
        _same_step, none_ok=True, kept=True,
    )  # fmt: skip


def _rounded(t) -> list[float]:
    return [round(x, 4) for x in t.tolist()]


def _apart(x: float, y: float) -> tuple[str, str]:
    """x and y with as many significant digits as it takes to tell them apart."""
    for n in range(4, 18):
        a, b = f"{x:.{n}g}", f"{y:.{n}g}"
        if a != b:
            break
    return a, b


def _same_values(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return f"returned {shown_type(got)}, expected a tensor of shape {tuple(want.shape)}"
    if got.dtype == torch.bool or got.dtype.is_complex:
        return f"returned {shown_type(got)}, expected the margins as floats"
    if torch.allclose(got.double(), want.double(), rtol=0, atol=1e-6):
        return None
    if torch.allclose(got.double(), -want.double(), rtol=0, atol=1e-6):
        return f"returned {_rounded(got)}: top-2 minus top-1; the margin is top-1 minus top-2"
    row = int((got.double() - want.double()).abs().argmax())
    a, b = _apart(float(got[row]), float(want[row]))
    if got.dtype.is_floating_point and torch.finfo(got.dtype).bits < torch.finfo(want.dtype).bits:
        near = torch.allclose(got.double(), want.double(), rtol=4 * torch.finfo(got.dtype).eps)
        if near:
            return (
                f"returned {got.dtype} margins, which keep about {digits(got)} significant "
                f"digits (row {row}: {a}, expected {b}): return them in the logits' dtype, "
                f"{want.dtype}"
            )
    if _rounded(got) == _rounded(want):
        return f"returned row {row} = {a}, expected {b}"
    return f"returned {_rounded(got)}, expected {_rounded(want)}"


def _margin(logits):
    top2 = logits.topk(2).values
    return top2[:, 0] - top2[:, 1]


@checker
def check_flip_margin(fn) -> Verdict:
    """fn(logits (B, V)) → top-1 minus top-2 logit per row, shape (B,)."""
    g = torch.Generator().manual_seed(0)
    cases = [
        ((torch.randn(3, 10, generator=g),), "random (3, 10) logits"),
        ((torch.tensor([[1.0, 1.0, 0.0]]),), "a tie [[1, 1, 0]]"),
        ((torch.tensor([[-3.0, -1.0], [2.0, -2.0]]),), "V = 2 [[-3, -1], [2, -2]]"),
        ((torch.tensor([[0.5, 4.0, 3.0, 4.5]]),), "one row [[0.5, 4, 3, 4.5]]"),
    ]
    return check_cases(fn, cases, _margin, "margins match: a tie has margin 0", _same_values,
                       kept=True)  # fmt: skip
