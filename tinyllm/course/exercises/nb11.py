"""Checkers of notebook 11 · what a graph leaves."""

import math

from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    Verdict,
    as_number,
    call,
    check_cases,
    checker,
    entered,
    hint,
    ok,
    shown_type,
    whole,
)
from tinyllm.course.viz.timing import gpu_idle_share

# --- exercise 1: the idle share of one replay -------------------------------------------------


def _idle_share(intervals) -> float:
    """The share of the span, first start to last end, in which no interval runs: the
    timelines' own viz.gpu_idle_share, on the intervals as kernels."""
    return gpu_idle_share([{"kind": "gpu", "name": "kernel", "start_us": start,
                            "dur_us": stop - start} for start, stop in intervals])  # fmt: skip


IDLE_CASES = [  # (intervals, what the case holds)
    ([(0.0, 2.0), (3.0, 5.0), (6.0, 10.0)], "three kernels in order, with gaps"),
    ([(6.0, 10.0), (0.0, 2.0), (3.0, 5.0)], "the same kernels out of order"),
    ([(0.0, 4.0), (3.0, 6.0), (8.0, 10.0)], "two kernels that overlap, as under PDL"),
    ([(0.0, 10.0), (2.0, 3.0), (5.0, 12.0)], "a kernel that runs inside a longer one"),
    ([(5.0, 7.0), (7.0, 9.0)], "two kernels end to end, no gap"),
    ([(1.0, 2.0), (4.0, 5.0)], "a span that starts at 1, not 0"),
    ([(0.0, 10.0), (2.0, 3.0)], "the last kernel to start ends first"),
    ([(0.0, 1.5), (4.25, 7.0), (2.0, 3.0)], "shares that are not round"),
]


def _latest_end_lost(intervals) -> float | None:
    """The idle share a merge gets when it keeps the last interval's end, not the latest."""
    spans = sorted(intervals)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = stop
    return 1 - busy / (end - spans[0][0]) if end != spans[0][0] else None


def _overlaps(intervals) -> bool:
    spans = sorted(intervals)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _same_share(got, want, intervals, before) -> str | None:
    if intervals != before:
        return (
            "changed intervals, its input (a sort in place?): the trace is read by others "
            "after you. Work on sorted(intervals)"
        )
    x = as_number(got)
    if x is None or isinstance(got, bool):
        return f"returned {shown_type(got)}: return the idle share, a number from 0 to 1"
    if math.isclose(x, want, rel_tol=1e-6, abs_tol=1e-7):  # float32 sums round too
        return None
    if math.isclose(x, 100 * want, abs_tol=1e-7):
        return f"returned {x:g}, expected {want:.4g}: a share from 0 to 1, not a percentage"
    summed = sum(stop - start for start, stop in intervals)
    spans = sorted(intervals)
    span = max(stop for _, stop in spans) - spans[0][0]
    if _overlaps(intervals) and math.isclose(x, 1 - summed / span, abs_tol=1e-9):
        return (
            f"returned {x:.4g}, expected {want:.4g}: you added every kernel's duration, but "
            f"two kernels overlap here and their common time counted twice. Count the time "
            f"in which at least one kernel runs"
        )
    first, last = intervals[0][0], intervals[-1][1]
    if (
        intervals != spans
        and (last - first) != 0
        and math.isclose(x, 1 - summed / (last - first), abs_tol=1e-9)
    ):
        return (
            f"returned {x:.4g}, expected {want:.4g}: the span runs from the earliest start "
            f"to the latest end, not from the first interval in the list to the last. The "
            f"trace's intervals come in any order: sort them"
        )
    lost = _latest_end_lost(intervals)
    if lost is not None and not math.isclose(lost, want) and math.isclose(x, lost, abs_tol=1e-9):
        return (
            f"returned {x:.4g}, expected {want:.4g}: a kernel can end before the one that "
            f"started earlier, when it runs inside it. Keep the latest end seen, "
            f"max(end, stop), not the last one"
        )
    if math.isclose(x, 1 - want, abs_tol=1e-9):
        return (
            f"returned {x:.4g}, expected {want:.4g}: that is the busy share. The idle share "
            f"is the rest of the span"
        )
    return f"returned {x:.4g}, expected {want:.4g}"


@checker
def check_idle_share(fn) -> Verdict:
    """fn(intervals) → the share of one replay's span with no kernel running: intervals is
    a list of (start_us, end_us), in any order, that may overlap."""
    for intervals, what in IDLE_CASES:
        given, before = list(intervals), list(intervals)
        shown_as = f"intervals={intervals} ({what})"
        with entered(gpu_idle_share) as ran:
            got = call(fn, (given,), shown_as, seconds=CALL_SECONDS)
        if got is FAILED:
            return False
        if ran[gpu_idle_share]:
            return hint(
                "your function calls viz.gpu_idle_share, the package's own answer: this "
                "exercise is to write it. Merge the intervals, then divide"
            )
        problem = _same_share(got, _idle_share(intervals), given, before)
        if problem:
            return hint(f"on {shown_as} your function {problem}")
    return ok("the idle share: the span less the time some kernel runs, overlaps counted once")


# --- exercise 2: how many kernels a target asks for -----------------------------------------


def _to_remove(step_us: float, target_us: float, us_per_node: float) -> int:
    """The fewest kernels whose floors alone add up to step_us - target_us (0 when the step
    is at the target already)."""
    return max(0, math.ceil((step_us - target_us) / us_per_node - 1e-9))


def _same_count(got, want, step_us, target_us, us_per_node) -> str | None:
    n = whole(got)
    if n is None:
        return f"returned {shown_type(got)}: a number of kernels is a whole number, an int"
    got = n
    if got == want:
        return None
    gap = (step_us - target_us) / us_per_node
    if want == 0 and got < 0:
        return (
            f"returned {got}, expected 0: the step takes {step_us} µs, already under the "
            f"{target_us} µs target. No kernel needs to go"
        )
    if got == math.floor(gap) and want == got + 1:
        return (
            f"returned {got}, expected {want}: {got} kernels save {got * us_per_node:.4g} µs, "
            f"short of the {step_us - target_us:.4g} µs to go. Round up"
        )
    if got == round(gap) and got != want:
        return f"returned {got}, expected {want}: round up, never to the nearest"
    if got == math.ceil(step_us / us_per_node - 1e-9):
        return (
            f"returned {got}, expected {want}: that is every kernel the whole step's time "
            f"would hold. Only the gap to the target, {step_us - target_us:.4g} µs, must go"
        )
    return f"returned {got}, expected {want}"


@checker
def check_kernels_to_remove(fn) -> Verdict:
    """fn(step_us, target_us, us_per_node) → the fewest kernels a step must lose to reach the
    target, if each kernel removed saved its floor alone: an int, 0 when it is there."""
    cases = [(55.7, 42.0, 0.898), (118.8, 70.0, 1.038), (20.0, 20.0, 0.9), (40.0, 45.0, 0.9),
             (10.0, 9.0, 0.5), (10.0, 9.5, 0.5), (62.7, 42.0, 0.451)]  # fmt: skip
    return check_cases(
        fn,
        [(c, f"step_us={c[0]}, target_us={c[1]}, us_per_node={c[2]}") for c in cases],
        _to_remove,
        "the gap to the target over the floor of a node, rounded up",
        _same_count,
        with_args=True,
    )
