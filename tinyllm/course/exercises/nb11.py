"""Checkers of notebook 11 · what a graph leaves."""

import math

import torch

from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    Verdict,
    as_number,
    call,
    checker,
    entered,
    hint,
    items,
    ok,
    quietly,
    shown,
    shown_type,
    whole,
)
from tinyllm.course.viz.timing import gpu_idle_share
from tinyllm.kernels import WHOLE_SPLIT, split_passes, tensor_cores
from tinyllm.lab.results import load_floor, load_paged


def _not_a_number(got, what: str) -> str | None:
    """What is wrong with an answer that is not one number (after 'your function '), or None
    for a number. `what` names the answer: 'the idle share, a number from 0 to 1'."""
    if got is None:
        return f"returned None. A function with no `return` line returns None. Return {what}"
    if isinstance(got, bool):
        return f"returned the bool {got}, a yes or no. Return {what}"
    if isinstance(got, str):
        return f"returned the string {shown(got)}, which is text. Return {what}, not its text"
    listed = items(got, (list, tuple))
    if listed is not None:
        kind = type(got).__name__
        if len(listed) == 1 and as_number(listed[0]) is not None:
            return f"returned a {kind} of one number, {shown(got)}. Return {what}, not a {kind}"
        return f"returned {shown_type(got)}. Return one number, {what}, not a {kind}"
    return None


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
    ([(0.0, 1.66), (4.25, 7.0), (1.93, 3.1)], "fractions of a µs, out of order"),
    ([(0.5, 2.16), (2.43, 3.6), (3.91, 5.52)], "fractions of a µs, from 0.5"),
    ([(0.0, 1.0), (5.0, 6.0), (2.0, 10.0)], "a gap, then a long kernel with a short one inside"),
]
SHARE = "the idle share, a number from 0 to 1"
INT_SHARE = (
    "The idle share is a fraction from 0 to 1, such as 0.2. "
    "It is not a yes or no, nor a whole number"
)
BY_END_PROBE = IDLE_CASES[-1][0]  # right: 0.1; sorted by end, then merged: 0.4
ZERO_LENGTH_PROBE = [(0.0, 0.0), (10.0, 10.0)]  # no kernel runs: the share is 1, even after //


def _busy(intervals) -> float:
    """The time in which at least one interval runs: the span less its idle share."""
    span = max(stop for _, stop in intervals) - min(start for start, _ in intervals)
    return span * (1 - _idle_share(intervals))


def _latest_end_lost(intervals) -> float | None:
    """The idle share a merge gets when it keeps the last interval's end, not the latest."""
    spans = sorted(intervals)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = stop
    return 1 - busy / (end - spans[0][0]) if end != spans[0][0] else None


def _by_end_shares(intervals) -> list[float]:
    """The idle shares a learner gets who sorts the intervals by their end, not their start,
    then merges them with the latest end seen: busy time merged or gaps added, over the span
    from the earliest start or from the first start in end order."""
    by_end = sorted(intervals, key=lambda iv: iv[1])
    latest = by_end[-1][1]
    busy, idle, end = 0.0, 0.0, by_end[0][0]
    for start, stop in by_end:
        idle += max(0.0, start - end)
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    spans = {latest - min(start for start, _ in intervals), latest - by_end[0][0]}
    return [share for span in spans if span > 0 for share in (1 - busy / span, idle / span)]


def _sorted_by_end(fn, x: float, want: float, intervals) -> bool:
    """Whether a wrong share x on intervals, and fn's share on BY_END_PROBE, are both what a
    merge of the intervals sorted by their end gives."""
    if not any(_near(x, y) and not _near(want, y) for y in _by_end_shares(intervals)):
        return False
    probe = as_number(quietly(fn, (list(BY_END_PROBE),)))
    right = _idle_share(BY_END_PROBE)
    return probe is not None and any(
        _near(probe, y) and not _near(right, y) for y in _by_end_shares(BY_END_PROBE)
    )


def _neighbour_gaps(intervals) -> float:
    """The idle time a learner gets who adds the gaps between neighbours in start order,
    each from the previous interval's end, not from the latest end seen."""
    spans = sorted(intervals)
    return sum(max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:]))


def _rounded(x: float, want: float) -> bool:
    """Whether x is want rounded to 2 to 6 decimals, to the nearest, down or up: x has that
    many decimals and lies within one of the last of them from want."""
    return any(_near(x, round(x, d)) and abs(x - want) <= 1.000001 / 10**d for d in range(2, 7))


def _overlaps(intervals) -> bool:
    spans = sorted(intervals)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _near(x: float, y: float | None) -> bool:
    return y is not None and math.isclose(x, y, abs_tol=1e-9)


def _share_problem(x: float, want: float, intervals) -> str | None:
    """What a wrong share x (after 'returned x, expected want: ') shows of the mistake
    behind it, or None when it matches no mistake the checker knows."""
    spans = sorted(intervals)
    first, latest = spans[0][0], max(stop for _, stop in spans)
    span, busy = latest - first, _busy(intervals)
    summed = sum(stop - start for start, stop in intervals)
    if math.isclose(x, 100 * want, abs_tol=1e-7):
        return "a share is from 0 to 1, not a percentage"
    if _near(x, 1 - want):
        return (
            "that is the busy share, the time kernels run over the span. "
            "The idle share is the rest of the span: 1 minus it"
        )
    if _near(x, span - busy):
        return (
            f"that is the idle time, {span - busy:g} µs. "
            f"The share is that time over the span, {span:g} µs"
        )
    if len(spans) > 2 and any(_near(x, idle / (len(spans) - 1)) for idle in
                              (span - busy, _neighbour_gaps(intervals))):  # fmt: skip
        return (
            f"that is the mean gap, the idle time over the {len(spans) - 1} gaps, in µs. "
            f"The idle share is the idle time over the span, {span:g} µs"
        )
    gaps = _neighbour_gaps(intervals)
    if not _near(gaps, span - busy) and _near(x, gaps / span):
        return (
            "you measured each gap from the end of the kernel just before. But a kernel can "
            "run inside a longer one, and the longer one still runs after it ends. Then the "
            "gap after it is not idle. Measure each gap from the latest end seen so far: "
            "end = max(end, this kernel's end)"
        )
    if _overlaps(intervals) and _near(x, 1 - summed / span):
        return (
            "you added every kernel's duration. But two kernels overlap here, "
            "and their common time counted twice. "
            "Count the time in which at least one kernel runs"
        )
    last = intervals[-1][1] - intervals[0][0]
    if intervals != spans and last and _near(x, 1 - summed / last):
        return (
            "the span runs from the earliest start to the latest end. "
            "It is not from the first interval in the list to the last. "
            "The trace's intervals come in any order: sort them"
        )
    lost = _latest_end_lost(intervals)
    to_last = spans[-1][1] - first
    if (lost is not None and not _near(want, lost) and _near(x, lost)) or (
        to_last
        and latest != spans[-1][1]
        and (_near(x, 1 - busy / to_last) or _near(x, (span - busy) / to_last))
    ):
        return (
            "a kernel can end before one that started earlier, when it runs inside it. "
            "So the last kernel to start need not end last. "
            "Keep the latest end seen, end = max(end, this kernel's end), not the last one"
        )
    if first and _near(x, (first + span - busy) / span):
        return (
            f"you counted the time before the first kernel, from 0 to {first:g} µs, as idle. "
            f"The span starts at the earliest start, not at 0. Set end = the earliest start "
            f"before the loop"
        )
    if first and (_near(x, 1 - busy / latest) or _near(x, (span - busy) / latest)):
        return (
            f"you divided by the latest end, as if the span started at 0. "
            f"Here the first kernel starts at {first:g} µs. "
            f"The span is the latest end less the earliest start"
        )
    if (
        summed
        and not _near(summed, span)
        and any(_near(x, y) for y in (1 - busy / summed, (span - busy) / summed))
    ):
        return (
            "you divided by the kernels' durations added up. "
            "The share is of the span instead: from the earliest start to the latest end"
        )
    if _rounded(x, want):
        return (
            "do not round the share. The checker compares it to many digits. "
            "Return it as your division gives it"
        )
    if not 0 <= x <= 1:
        return "a share is never below 0 or above 1"
    return None


def _same_for_all(values: list, wants: list, inputs: str, why: dict) -> str | None:
    """The hint for a function that returned one value whatever it was given (after 'your
    function '), when that value is wrong somewhere; `why` says what some values mean."""
    if any(v != values[0] for v in values):
        return None
    if all(math.isclose(v, w) for v, w in zip(values, wants)):
        return None
    v = values[0]
    said = "".join(f" {m}" for value, m in why.items() if v == value)
    return f"returned {v:g} on every case, whatever the {inputs}.{said}"


# A learner's function that reached the package's answer, whether it returned or raised: the
# package's takes a trace's events, so handed (start, end) pairs it raises.
LIBRARY = ("viz.gpu_idle_share, the package's own answer, which reads a trace's events. This "
           "exercise asks you to write it. Merge the intervals, then divide")  # fmt: skip


@checker
def check_idle_share(fn) -> Verdict:
    """fn(intervals) → the share of one replay's span with no kernel running: intervals is
    a list of (start_us, end_us), in any order, that may overlap."""
    answers, raw = [], []
    for intervals, what in IDLE_CASES:
        given, before = list(intervals), list(intervals)
        shown_as = f"intervals={intervals} ({what})"
        with entered(gpu_idle_share) as ran:
            library = lambda e: f"it called {LIBRARY}" if ran[gpu_idle_share] else None  # noqa: E731
            got = call(fn, (given,), shown_as, none_ok=True, seconds=CALL_SECONDS, explain=library)
        if got is FAILED:
            return False
        if ran[gpu_idle_share]:
            return hint(f"your function calls {LIBRARY}")
        if given != before:
            return hint(
                f"on {shown_as} your function changed intervals, its input. A sort in place "
                f"does that. The trace is read by others after you. Work on sorted(intervals)"
            )
        problem = _not_a_number(got, SHARE)
        if problem is None and (isinstance(got, torch.Tensor) or type(got).__name__ == "ndarray"):
            problem = (
                f"returned {shown_type(got)}. Return the idle share as a float, not a "
                f"tensor or an array: float(...) gives one"
            )
        x = as_number(got)
        if problem is None and x is None:
            problem = f"returned {shown_type(got)}. Return {SHARE}"
        if problem is None and not math.isfinite(x):
            problem = f"returned {x}, which is not a share. Return {SHARE}"
        if problem:
            return hint(f"on {shown_as} your function {problem}")
        answers.append(x)
        raw.append(got)
    wants = [_idle_share(intervals) for intervals, _ in IDLE_CASES]
    why = {0: "0 says no kernel ever waits. Yet the first case has gaps between its kernels.",
           1: "1 says no kernel ever runs."}  # fmt: skip
    same = _same_for_all(answers, wants, "intervals", why)
    if same and all(x == 0 for x in answers):
        probe = as_number(quietly(fn, (list(ZERO_LENGTH_PROBE),)))
        if probe is not None and _near(probe, 1.0) and all(whole(g) is not None for g in raw):
            return hint(
                f"your function returned the int 0 on every case: {INT_SHARE}. Return the "
                f"idle time divided by the span, with /, and do not round it"
            )
        if probe is not None and _near(probe, 1.0):
            return hint(
                "your function returned 0 on every case. Floor division, //, rounds the "
                "share down to 0: the idle time is always less than the span. Use /"
            )
    if same:
        return hint(
            f"your function {same} Compute the share from them: the idle time over the span"
        )
    for (intervals, what), got, x, want in zip(IDLE_CASES, raw, answers, wants):
        if math.isclose(x, want, rel_tol=1e-6, abs_tol=1e-7):  # float32 sums round too
            continue
        shown_as = f"intervals={intervals} ({what})"
        wrong = f"on {shown_as} your function returned {x:.4g}, expected {want:.4g}"
        if intervals != sorted(intervals):
            again = as_number(quietly(fn, (sorted(intervals),)))
            if again is not None and math.isclose(again, want, rel_tol=1e-6, abs_tol=1e-7):
                return hint(
                    f"{wrong}. On the same intervals sorted, it returns the right share. "
                    f"So it counts on the list's order. The trace's intervals come in any "
                    f"order: sort them first, with sorted(intervals)"
                )
        if whole(got) is not None:
            return hint(
                f"{wrong}: that is an int. {INT_SHARE}. Return the idle time divided by "
                f"the span, with /"
            )
        if _sorted_by_end(fn, x, want, intervals):
            return hint(
                f"{wrong}: you sorted the intervals by their end. Sort them by their start, "
                f"with sorted(intervals). A kernel may start early and end late. In end order "
                f"it comes after the short kernels it covers. The merge then misses the time "
                f"it ran before them"
            )
        problem = _share_problem(x, want, intervals)
        return hint(f"{wrong}: {problem}" if problem else wrong)
    return ok("the idle share: the span less the time some kernel runs, overlaps counted once")


# --- exercise 2: how many kernels a target asks for -----------------------------------------

COUNT = "a whole number of kernels, an int"
IN_TARGET = ("that is how many floors of a node fit in the target, not the kernels to remove. The "
             "time to save is step_us - target_us. Divide it by us_per_node")  # fmt: skip


def _recorded_case() -> list[tuple]:
    """Section 2's paged fused step against 35 µs, at the floor of a Triton node: read from
    the recordings, so the case follows them."""
    paged, floor = load_paged(), load_floor()
    if paged is None or floor is None:
        return []
    return [(paged["headline"]["paged_fused_step_us"], 35.0, floor["triton"]["us_per_node"])]


# (step_us, target_us, us_per_node); then section 2's step, from the recordings
REMOVE_CASES = [(45.5, 42.0, 0.898), (118.8, 70.0, 1.038), (20.0, 20.0, 0.9), (40.0, 45.0, 0.9),
                (10.0, 9.0, 0.5), (10.0, 9.5, 0.5), (62.7, 42.0, 0.451)]  # fmt: skip
REMOVE_CASES += _recorded_case()


def _to_remove(step_us: float, target_us: float, us_per_node: float) -> int:
    """The fewest kernels whose floors alone add up to step_us - target_us (0 when the step
    is at the target already)."""
    return max(0, math.ceil((step_us - target_us) / us_per_node - 1e-9))


def _roundings(x: float) -> set[int]:
    return {math.floor(x), math.ceil(x), round(x)}


def _not_a_count(got) -> str | None:
    """What is wrong with an answer that is not an int (after 'your function '), or None."""
    if whole(got) is not None:
        return None
    problem = _not_a_number(got, COUNT)
    if problem:
        return problem
    x = as_number(got)
    if x is None or not math.isfinite(x):
        return f"returned {shown_type(got)}. Return {COUNT}"
    if x != int(x):
        return (
            f"returned {shown_type(got)}. A step cannot lose part of a kernel. Return a "
            f"whole number, an int. Round it so that the kernels lost reach the target"
        )
    if isinstance(got, float) or getattr(getattr(got, "dtype", None), "kind", "") == "f":
        return (
            f"returned {shown_type(got)}. A count of kernels is a whole number, an int: "
            f"{int(x)}, not {x!r}. math.ceil gives an int. np.ceil and / give floats"
        )
    return f"returned {shown_type(got)}. A count of kernels is a Python int: int(x) gives one"


def _a_time(x, step_us, target_us, us_per_node) -> str | None:
    """What an answer x near the step's time after the removal, not the count, shows; or
    None."""
    want = _to_remove(step_us, target_us, us_per_node)
    after = step_us - want * us_per_node
    if x is None or x == want or step_us <= target_us or abs(x - after) >= 1:
        return None
    return (f"that is a time, about the step's {after:.4g} µs after the removal. Return the "
            f"number of kernels to remove")  # fmt: skip


def _a_time_returned(got, *case) -> str | None:
    """_a_time for an answer that is not a whole number (after 'your function '); a whole
    one goes on to _same_count."""
    time = None if whole(got) is not None else _a_time(as_number(got), *case)
    return f"returned {shown_type(got)}: {time}" if time else None


def _same_count(got: int, want: int, step_us, target_us, us_per_node) -> str:
    """What a wrong count shows of the mistake behind it (after 'returned got, expected
    want'), or '' when it matches no mistake the checker knows."""
    gap = (step_us - target_us) / us_per_node
    over = step_us - target_us
    if want == 0 and got < 0:
        return (
            f"the step takes {step_us} µs, already under the {target_us} µs target. "
            f"No kernel needs to go, and a count is never negative"
        )
    if got == want + 1 and math.isclose(step_us - want * us_per_node, target_us):
        if want == 0:
            where = f"the step takes {step_us} µs, exactly its target. At the target no kernel"
        else:
            saves = f"{want} kernels save" if want > 1 else "1 kernel saves"
            where = (
                f"{saves} {want * us_per_node:.4g} µs, exactly the {over:.4g} µs to go. "
                f"That puts the step at its target, so no more kernel"
            )
        return (
            f"{where} needs to go: the step must take at most target_us. "
            f"A loop on >= counts one kernel too many there. So does int(x) + 1 "
            f"when x, the time to save over us_per_node, is whole. Loop while the step is "
            f"over the target, with >, or round up with math.ceil"
        )
    if want == 0 and got > 0 and step_us < target_us:
        why = (". abs() counts a step under its target as one over it"
               if got in _roundings(-gap) else "")  # fmt: skip
        return (
            f"the step takes {step_us} µs, already under the {target_us} µs target. "
            f"No kernel needs to go{why}"
        )
    if time := _a_time(got, step_us, target_us, us_per_node):
        return time
    if got == math.floor(gap) and want == got + 1:
        return (
            f"{got} kernels save {got * us_per_node:.4g} µs, short of the {over:.4g} µs to "
            f"go. Round up, once, after dividing the time to save: "
            f"math.ceil((step_us - target_us) / us_per_node)"
        )
    if got == round(gap):
        return "round up, never to the nearest"
    if over > 0 and got in {0, *_roundings(-gap)}:
        return (
            f"the step is {over:.4g} µs over its target. You subtracted the other way. "
            f"The time to save is step_us - target_us"
        )
    if over > 0 and got in _roundings(over / (us_per_node / 1000)):
        return (
            "a thousand times too many: step_us, target_us and us_per_node are all in µs, "
            "so divide the time to save by us_per_node as it is"
        )
    by_target = over > 0 and got in _roundings(over / target_us)  # divided by the target
    or_target = ". Or you divided by the target: divide by us_per_node" if by_target else ""
    if over > 0 and got in _roundings(us_per_node / over) & _roundings(over / (us_per_node * 1000)):
        return (
            "far too few. A unit may be off: step_us, target_us and us_per_node are all in µs. "
            "Or you divided the floor of a node by the time to save"
            f"{', or the time to save by the target' if by_target else ''}. Divide the time "
            "to save by us_per_node"
        )
    if over > 0 and got in _roundings(us_per_node / over):
        return (
            "you divided the floor of a node by the time to save. Divide the other way: "
            f"how many floors of a node fit in the time to save{or_target}"
        )
    if by_target:
        return (
            "you divided the time to save by the target. Each kernel saves us_per_node µs: "
            "divide the time to save by us_per_node"
        )
    if got in _roundings(over * us_per_node):
        return (
            "you multiplied the time to save by the floor of a node. Each kernel saves "
            "us_per_node µs, so divide by it"
        )
    if target_us and got in _roundings(step_us / target_us):
        return (
            f"you divided the step by its target. The time to save is step_us - target_us, "
            f"{over:.4g} µs, and each kernel removed saves us_per_node"
        )
    if got == math.ceil(step_us / us_per_node - 1e-9):
        return (
            f"that is every kernel the whole step's time would hold. "
            f"Only the gap to the target, {over:.4g} µs, must go"
        )
    if over > 0 and got in _ceils(target_us / us_per_node):
        return IN_TARGET
    if over > 0 and got == want + 1:
        return (
            f"one kernel too many: {want} kernels save {want * us_per_node:.4g} µs, enough for "
            f"the {over:.4g} µs to go. Round up once, and add nothing after"
        )
    return ""


def _explain_removal(case):
    """What a learner's error on case says: a division by a time to save of 0, where the step
    is at its target."""

    def explain(error: Exception) -> str | None:
        if case[0] == case[1] and isinstance(error, ZeroDivisionError):
            return (
                "here the step is at its target, so the time to save is 0. Divide it by "
                "us_per_node, never by it"
            )
        return None

    return explain


def _ceils(x: float) -> set[int]:
    """x rounded up, with and without a hair off for float error: either is a learner's."""
    return {math.ceil(x), math.ceil(x - 1e-9)}


# A learner's rule for the count, and what it shows, tried on every step over its target at once
COUNT_MISTAKES = (
    (lambda s, t, u: {c + 1 for c in _ceils((s - t) / u)},
     "one kernel too many on every step over its target. Round up once, and add nothing after"),
    (lambda s, t, u: _ceils(t / u), IN_TARGET),
    (lambda s, t, u: _ceils(s - t),
     "that is the time to save, in µs, not a count of kernels. Divide it by us_per_node, the µs "
     "one kernel saves, then round up"),
)  # fmt: skip


def _rounded_savings():
    """The time to save as a learner may round it before dividing: the difference rounded,
    or each time rounded first."""
    for r in (math.floor, math.ceil, round):
        yield lambda s, t, r=r: r(s - t)
        yield lambda s, t, r=r: r(s) - r(t)


@checker
def check_kernels_to_remove(fn) -> Verdict:
    """fn(step_us, target_us, us_per_node) → the fewest kernels a step must lose to reach the
    target, if each kernel removed saved its floor alone: an int, 0 when it is there."""
    answers = []
    for case in REMOVE_CASES:
        shown_as = f"step_us={case[0]}, target_us={case[1]}, us_per_node={case[2]}"
        got = call(fn, case, shown_as, none_ok=True, seconds=CALL_SECONDS,
                   explain=_explain_removal(case))  # fmt: skip
        if got is FAILED:
            return False
        problem = _a_time_returned(got, *case) or _not_a_count(got)
        if problem:
            return hint(f"on {shown_as} your function {problem}")
        answers.append(whole(got))
    wants = [_to_remove(*case) for case in REMOVE_CASES]
    why = {0: "0 says each step is at its target already. Yet the first step is over it."}
    same = _same_for_all(answers, wants, "step and the target", why)
    if same:
        return hint(
            f"your function {same} Compute the count from them: the time to save, over what "
            f"one kernel saves"
        )
    over = [
        (case, got, want)
        for case, got, want in zip(REMOVE_CASES, answers, wants)
        if case[0] > case[1]
    ]  # the steps over their target: what is rounded shows there
    for saved in _rounded_savings():
        if all(got == math.ceil(saved(s, t) / u) for (s, t, u), got, _ in over) and any(
            got != want for _, got, want in over
        ):
            (s, t, u), got, want = next((c, a, w) for c, a, w in over if a != w)
            return hint(
                f"on step_us={s}, target_us={t}, us_per_node={u} your function returned {got}, "
                f"expected {want}: you rounded the time to save before dividing. Divide "
                f"first, then round the count up, once"
            )
    for rule, says in COUNT_MISTAKES:
        if all(got in rule(*c) for c, got, _ in over) and any(g != w for _, g, w in over):
            (s, t, u), got, want = next((c, a, w) for c, a, w in over if a != w)
            return hint(f"on step_us={s}, target_us={t}, us_per_node={u} your function "
                        f"returned {got}, expected {want}: {says}")  # fmt: skip
    for case, got, want in zip(REMOVE_CASES, answers, wants):
        if got != want:
            shown_as = f"step_us={case[0]}, target_us={case[1]}, us_per_node={case[2]}"
            problem = _same_count(got, want, *case)
            wrong = f"on {shown_as} your function returned {got}, expected {want}"
            return hint(f"{wrong}: {problem}" if problem else wrong)
    return ok("the gap to the target over the floor of a node, rounded up")


# --- exercise 3: the form a graph captures ----------------------------------------------------

FORMS = ("sums", "one pass", "pipelined")
FORM_CASES = (  # (width, splits): the blocks of a row's table, and the splits of its keys
    (64, 64),  # the shipped model at batch 1: a block a split
    (64, 16),  # batch 8: four blocks a split, the most read in one pass
    (64, 8),  # batch 16: eight
    (64, 1),  # 256 rows: the whole table
    (64, 32),  # batch 4: two
    (9, 2),  # five blocks: rounded down, four
    (6, 4),  # two blocks: rounded down, one
    (3, 4),  # more splits than blocks: one block at most
    (5, 4),  # two blocks: to the nearest, one
    (17, 4),  # five blocks: to the nearest, four
)


def _most_blocks(width: int, splits: int, up: bool | None = True) -> int:
    """width / splits rounded up, or down (up=False), or to the nearest, halves up (None)."""
    if up is None:
        return (2 * width + splits) // (2 * splits)
    return -(-width // splits) if up else width // splits


def _form(width: int, splits: int) -> str:
    """The package's rule (kernels.tensor_cores, kernels.split_passes), as the form's name."""
    if not tensor_cores(width, splits):
        return "sums"
    return (
        "one pass" if split_passes(width, splits)[0] >= _most_blocks(width, splits) else "pipelined"
    )


def _form_of(most: int, whole: int = WHOLE_SPLIT) -> str:
    """The form for a split of `most` blocks at most."""
    return "sums" if most <= 1 else "one pass" if most <= whole else "pipelined"


def _mistaken(width: int, splits: int, up: bool | None = True, whole: int = WHOLE_SPLIT) -> str:
    """A learner's rule with a mistake: the blocks rounded down (up=False) or to the nearest
    (up=None), or a split of WHOLE_SPLIT blocks taken as a long one (whole=WHOLE_SPLIT - 1)."""
    return _form_of(_most_blocks(width, splits, up), whole)


def _wrong_form(answers: list) -> str:
    """What a learner's forms on FORM_CASES show of the mistake behind them, or ''."""
    if answers == [_mistaken(w, s, up=False) for w, s in FORM_CASES]:
        return (
            "you rounded the blocks a split holds down. One split takes the blocks left over: "
            "round up, with -(-width // splits) or math.ceil(width / splits)"
        )
    nearest = [[_mistaken(w, s, up=None) for w, s in FORM_CASES],
               [_form_of(round(w / s)) for w, s in FORM_CASES]]  # fmt: skip
    if answers in nearest:
        return (
            "you rounded the blocks a split holds to the nearest. One split takes the blocks "
            "left over: round up, with -(-width // splits) or math.ceil(width / splits)"
        )
    if answers == [_form_of(w // s + 1) for w, s in FORM_CASES]:
        return (
            "adding 1 to width // splits gives one block too many where the splits divide the "
            "table evenly: 64 blocks in 64 splits hold 1 each. Round up with -(-width // splits) "
            "or math.ceil(width / splits)"
        )
    if answers == [_mistaken(w, s, whole=WHOLE_SPLIT - 1) for w, s in FORM_CASES]:
        return (
            f"a split of exactly {WHOLE_SPLIT} blocks is still read in one pass: "
            f"more than {WHOLE_SPLIT} is pipelined"
        )
    if all(a != "sums" for a in answers):
        return "a split of one block takes the sums of products: tensor cores need more"
    return ""


FORM_LIBRARY = (
    "kernels.tensor_cores or kernels.split_passes, the package's own rule. This exercise asks "
    "you to write it. Divide the table's blocks by the splits, round up, then compare"
)


@checker
def check_form(fn) -> Verdict:
    """fn(width, splits) → the form the fused kernel takes for a table of `width` blocks in
    `splits` splits: "sums", "one pass" or "pipelined"."""
    answers = []
    for width, splits in FORM_CASES:
        shown_as = f"width={width}, splits={splits}"
        with entered(tensor_cores, split_passes) as ran:
            library = lambda e: f"it called {FORM_LIBRARY}" if any(ran.values()) else None  # noqa: E731
            got = call(fn, (width, splits), shown_as, none_ok=True, seconds=CALL_SECONDS,
                       explain=library)  # fmt: skip
        if got is FAILED:
            return False
        if any(ran.values()):
            return hint(f"your function calls {FORM_LIBRARY}")
        if not isinstance(got, str):
            return hint(
                f"on {shown_as} your function returned {shown_type(got)}. Return the form's "
                f"name, one of the strings {', '.join(map(repr, FORMS))}"
            )
        if got not in FORMS:
            return hint(
                f"on {shown_as} your function returned {shown(got)}. Return exactly one of "
                f"{', '.join(map(repr, FORMS))}"
            )
        answers.append(got)
    wants = [_form(w, s) for w, s in FORM_CASES]
    if answers != wants:
        (width, splits), got, want = next(
            (case, a, w) for case, a, w in zip(FORM_CASES, answers, wants) if a != w
        )
        most = _most_blocks(width, splits)
        wrong = (
            f"on width={width}, splits={splits} your function returned {got!r}, expected "
            f"{want!r}: a split holds at most {most} block{'s' * (most > 1)} there"
        )
        problem = _wrong_form(answers)
        return hint(f"{wrong}. {problem[0].upper() + problem[1:]}" if problem else wrong)
    return ok("the blocks a split holds, rounded up: one takes the sums, up to four one pass")


# --- exercise 4: who combines -------------------------------------------------------------------

COMBINE_CASES = (  # (order the programs finished in, by split index; splits; the count before)
    ([2, 0, 3, 1], 4, 0),  # the last to finish combines
    ([0, 1, 2, 3], 4, 0),  # in order: the highest split, by chance
    ([3, 1, 0, 2], 4, 1),  # a count left over: the third to finish combines, too early
    ([5, 2, 7, 0, 4, 1, 6, 3], 8, 3),  # the fifth of eight
    ([1, 0], 2, 0),
    ([0], 1, 0),  # one split: its program combines
    ([2, 0, 3, 1], 4, 4),  # no add hands back 3: nobody combines
    ([2, 0, 3, 1], 4, 6),
)
WHO = "the split index of the program that combines, an int, or None when no program does"
PLACES = "the k-th program to finish, counting from 0, gets back start + k"


def _combiner(order: list, splits: int, start: int):
    """The protocol of the kernels at d0d4828 (notebook 11's Reference R.2): the add that
    hands back splits - 1 is the combiner's; the count before the k-th add (from 0) is
    start + k."""
    k = splits - 1 - start
    return order[k] if 0 <= k < len(order) else None


def _at(order: list, place: int):
    """order[place], or None where the place is past either end: a guarded learner's answer."""
    return order[place] if 0 <= place < len(order) else None


def _indexed(order: list, place: int):
    """order[place] as Python reads it, a negative place from the end; None past either end."""
    return order[place] if -len(order) <= place < len(order) else None


def _wrapped(order: list, splits: int, start: int):
    """The program whose count, taken modulo splits, is splits - 1: a count read as wrapping."""
    return next((p for k, p in enumerate(order) if (start + k) % splits == splits - 1), None)


def _wrong_combiner(answers: list) -> str:
    """What a learner's answers on COMBINE_CASES show of the mistake behind them, or ''. Each
    rule is matched on the cases where some program combines, whatever the answer elsewhere."""
    wants = [_combiner(*case) for case in COMBINE_CASES]

    def like(rule) -> bool:
        return all(
            got == rule(list(o), s, c)
            for got, want, (o, s, c) in zip(answers, wants, COMBINE_CASES)
            if want is not None
        )

    if like(lambda o, s, c: o[-1]):
        return (
            "you took the last program to finish whatever the count held before. The count "
            "starts at `start`: with 1 left over, the third add of four already hands back 3"
        )
    if like(lambda o, s, c: s - 1):
        return (
            "you returned the highest split index. The combiner is the program whose add hands "
            "back splits - 1, whatever its index"
        )
    if like(lambda o, s, c: s - 1 - c):
        return "you returned the program's place in the order. Return its split index: order[place]"
    if like(lambda o, s, c: o.index(s - 1 - c)):
        return (
            "you used order.index(splits - 1 - start): the place where that split's program "
            "finished, not a split index. The combiner is the program at place "
            "splits - 1 - start: order[place]"
        )
    if like(lambda o, s, c: o[c]):
        return (
            "order[start] is the program at place `start`. The k-th program to finish, from 0, "
            "gets back start + k: the one that gets back splits - 1 is at place splits - 1 - start"
        )
    if len(set(answers)) == 1:
        return (
            f"you return {answers[0]} on every case, whatever the order. The combiner "
            f"depends on the order the programs finished in"
        )
    if like(lambda o, s, c: o[0]) or like(lambda o, s, c: o[0] if c == 0 else None):
        return "the first program to finish gets back `start`, not splits - 1"
    if like(lambda o, s, c: _at(o, s - 2 - c)) or like(lambda o, s, c: _indexed(o, s - 2 - c)):
        return (
            "one place early: you compared the count after the add. The add hands back the "
            "count from before it: the first program to finish gets back `start`, the next "
            "start + 1"
        )
    if like(lambda o, s, c: _at(o, s - c)):
        return (
            "one place late. The add hands back the count from before it: the first program "
            "to finish gets back `start`, the next start + 1"
        )
    if like(lambda o, s, c: _at(o, s - 1 + c)):
        return (
            "you added `start` where it should be subtracted. The k-th program to finish, "
            "from 0, gets back start + k, so the combiner is at place splits - 1 - start"
        )
    if like(lambda o, s, c: o[s - 1 - c]):  # right where some program combines: wrong elsewhere
        if any(a == -1 for a, w in zip(answers, wants) if w is None):
            return "when no program combines, return None, not -1"
        nobody = [(a, case) for a, w, case in zip(answers, wants, COMBINE_CASES) if w is None]
        negative = all(a == _indexed(list(o), s - 1 - c) for a, (o, s, c) in nobody)
        wraps = all(a == _wrapped(list(o), s, c) for a, (o, s, c) in nobody)
        said = ["when the count starts at `splits` or more, no add hands back splits - 1: "
                "return None"]  # fmt: skip
        if wraps:  # a modulo; an unchecked negative index gives the same answers here
            said.append("the count only grows: it never comes back round to splits - 1")
        if wraps and negative:
            said.append("a count taken modulo splits hides that, and so does a negative index, "
                        "which Python counts from the end")  # fmt: skip
        elif negative:
            said.append("in Python a negative index counts from the end, so order[-1] is no error")
        return ". ".join([said[0]] + [x[0].upper() + x[1:] for x in said[1:]])
    return ""


NOBODY = "here no program combines: return None"


@checker
def check_combiner(fn) -> Verdict:
    """fn(order, splits, start) → the split index of the program whose atomic add hands back
    splits - 1, the count having held `start` before the call; None if no add does."""
    answers = []
    for order, splits, start in COMBINE_CASES:
        shown_as = f"order={order}, splits={splits}, start={start}"
        why = NOBODY if _combiner(order, splits, start) is None else PLACES
        explain = lambda e, why=why: why if isinstance(e, IndexError) else None  # noqa: E731
        got = call(fn, (list(order), splits, start), shown_as, none_ok=True, seconds=CALL_SECONDS,
                   explain=explain)  # fmt: skip
        if got is FAILED:
            return False
        if got is not None and (isinstance(got, bool) or whole(got) is None):
            return hint(f"on {shown_as} your function returned {shown_type(got)}. Return {WHO}")
        answers.append(None if got is None else whole(got))
    wants = [_combiner(*case) for case in COMBINE_CASES]
    if all(a is None for a in answers):
        return hint(
            "your function returned None every time. A function with no `return` line returns "
            f"None, and a print is not a return. Return {WHO}"
        )
    if answers != wants:
        (order, splits, start), got, want = next(
            (case, a, w) for case, a, w in zip(COMBINE_CASES, answers, wants) if a != w
        )
        wrong = (
            f"on order={order}, splits={splits}, start={start} your function returned {got}, "
            f"expected {want}"
        )
        problem = _wrong_combiner(answers)
        return hint(f"{wrong}: {problem}" if problem else wrong)
    return ok("the add that hands back splits - 1: order[splits - 1 - start], if there is one")
