"""Checkers of notebook 05 · bit exactness."""

import math

import torch

from tinyllm.course.exercises.harness import check_cases


def _first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)), None)


def check_first_difference(fn) -> bool:
    """fn(a_logits_list, b_logits_list) → first step index where not torch.equal, or None."""
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(2, 5, generator=g) for _ in range(4)]
    ulp = [x.clone() for x in a]
    ulp[3][1, 2] = torch.nextafter(a[3][1, 2], torch.tensor(math.inf))  # one ulp apart
    first = [x.clone() for x in a]
    first[0] += 1
    cases = [
        ((a, [x.clone() for x in a]), "identical lists"),
        ((a, first), "lists that differ from step 0"),
        ((a, ulp), "lists one float ulp apart at step 3 only"),
    ]
    return check_cases(
        fn, cases, _first_difference, "bit for bit: even one ulp counts", none_ok=True
    )


def _rounded(t) -> list[float]:
    return [round(x, 4) for x in t.tolist()]


def _same_values(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        shown = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f"returned {shown}, expected a tensor of shape {tuple(want.shape)}"
    if torch.allclose(got.float(), want, atol=1e-6):
        return None
    return f"returned {_rounded(got)}, expected {_rounded(want)}"


def _margin(logits):
    top2 = logits.topk(2).values
    return top2[:, 0] - top2[:, 1]


def check_flip_margin(fn) -> bool:
    """fn(logits (B, V)) → top-1 minus top-2 logit per row, shape (B,)."""
    g = torch.Generator().manual_seed(0)
    cases = [
        ((torch.randn(3, 10, generator=g),), "random (3, 10) logits"),
        ((torch.tensor([[1.0, 1.0, 0.0]]),), "a tie [[1, 1, 0]]"),
        ((torch.tensor([[-3.0, -1.0], [2.0, -2.0]]),), "V = 2 [[-3, -1], [2, -2]]"),
    ]
    return check_cases(fn, cases, _margin, "margins match: a tie has margin 0", _same_values)
