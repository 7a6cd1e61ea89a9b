"""tinyllm.course.exercises.nb11: the checkers of notebook 11's exercises (the idle share of
one replay, the kernels a target asks for, the form a graph captures, who combines).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_hint, assert_ok

from tinyllm.course.exercises import (
    check_combiner,
    check_form,
    check_idle_share,
    check_kernels_to_remove,
)
from tinyllm.course.exercises.nb11 import (
    COMBINE_CASES,
    FORM_CASES,
    IDLE_CASES,
    _combiner,
    _form,
    _idle_share,
    _to_remove,
)
from tinyllm.course.viz import timing
from tinyllm.kernels import split_passes, tensor_cores
from tinyllm.lab.results import results_dir

# --- exercise 1: the idle share of one replay --------------------------------------------------


def my_idle_share(intervals):
    spans = sorted(intervals)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return 1 - busy / (end - spans[0][0])


def test_the_reference_is_the_figures_idle_share():
    """The checker's reference is viz.timing.gpu_idle_share, and so is a learner's right
    answer, on every case and on a recorded replay."""
    for intervals, _ in IDLE_CASES:
        assert math.isclose(_idle_share(intervals), my_idle_share(intervals))
    trace = json.loads((results_dir() / "traces" / "h200.json").read_text())
    events = [e for e in trace["batch"]["1"]["graph"] if e["step"] == 0]
    kernels = [(e["start_us"], e["start_us"] + e["dur_us"]) for e in events
               if e["kind"] == "gpu" and not e["name"].startswith("Memcpy")]  # fmt: skip
    assert math.isclose(my_idle_share(kernels), timing.gpu_idle_share(events))


def span_to_the_last_start(intervals):
    spans = sorted(intervals)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return 1 - busy / (spans[-1][1] - spans[0][0])


def sorts_in_place(intervals):
    intervals.sort()
    return my_idle_share(intervals)


def summed(intervals):
    spans = sorted(intervals)
    span = max(b for _, b in spans) - spans[0][0]
    return 1 - sum(b - a for a, b in spans) / span


def unsorted_span(intervals):
    return 1 - sum(b - a for a, b in intervals) / (intervals[-1][1] - intervals[0][0])


def merge_in_list_order(intervals):  # forgets to sort
    busy, end = 0.0, intervals[0][0]
    for start, stop in intervals:
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return 1 - busy / (end - intervals[0][0])


def idle_over_summed_durations(intervals):  # divides by the durations added up, not the span
    spans = sorted(intervals)
    span = max(b for _, b in spans) - spans[0][0]
    idle = span * my_idle_share(intervals)
    return idle / sum(b - a for a, b in intervals)


def busy_over_summed_durations(intervals):
    spans = sorted(intervals)
    span = max(b for _, b in spans) - spans[0][0]
    busy = span * (1 - my_idle_share(intervals))
    return 1 - busy / sum(b - a for a, b in intervals)


def idle_time(intervals):  # the idle µs, not their share
    spans = sorted(intervals)
    return (max(b for _, b in spans) - spans[0][0]) * my_idle_share(intervals)


def span_from_zero(intervals):  # divides by the latest end, as if the span started at 0
    spans = sorted(intervals)
    latest = max(b for _, b in spans)
    busy = (latest - spans[0][0]) * (1 - my_idle_share(intervals))
    return 1 - busy / latest


def only_passes(intervals):
    pass


def neighbour_gaps(intervals):  # gaps between sorted neighbours, no running max of the end
    spans = sorted(intervals)
    idle = sum(max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:]))
    return idle / (max(b for _, b in spans) - spans[0][0])


def idle_over_latest_end(intervals):  # (span - busy) / latest end, as if the span started at 0
    spans = sorted(intervals)
    latest = max(b for _, b in spans)
    span = latest - spans[0][0]
    return span * my_idle_share(intervals) / latest


def mean_gap(intervals):  # the idle µs over the number of gaps, not over the span
    spans = sorted(intervals)
    idle = (max(b for _, b in spans) - spans[0][0]) * my_idle_share(intervals)
    return idle / (len(spans) - 1)


def merge_with_last_end(intervals):  # forgets that a kernel may end before the one it follows
    spans = sorted(intervals)
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = stop
    return 1 - busy / (end - spans[0][0])


def sorted_by_end(intervals):  # sorts by the end, key=lambda x: x[1], not by the start
    spans = sorted(intervals, key=lambda x: x[1])
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return 1 - busy / (end - spans[0][0])


def sorted_by_end_from_earliest(intervals):  # as above, the span from the earliest start
    spans = sorted(intervals, key=lambda x: x[1])
    busy, end = 0.0, spans[0][0]
    for start, stop in spans:
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return 1 - busy / (end - min(a for a, _ in intervals))


def gaps_sorted_by_end(intervals):  # the gaps from the latest end, in end order
    spans = sorted(intervals, key=lambda x: x[1])
    idle, end = 0.0, spans[0][1]
    for start, stop in spans[1:]:
        idle += max(0.0, start - end)
        end = max(end, stop)
    return idle / (end - min(a for a, _ in intervals))


def floor_division(intervals):  # (span - busy) // span: always 0.0
    spans = sorted(intervals)
    span = max(b for _, b in spans) - spans[0][0]
    busy = span * (1 - my_idle_share(intervals))
    return (span - busy) // span


def at_least_half(intervals):  # an int, 0 or 1: a yes or no, not a share
    return int(my_idle_share(intervals) >= 0.5)


def test_the_probes_tell_the_mistakes_apart():
    """The case sorted by end catches a merge in end order; the zero-length probe tells //
    from a constant 0."""
    probe = IDLE_CASES[-1][0]
    assert math.isclose(my_idle_share(probe), 0.1)
    for wrong in (sorted_by_end, sorted_by_end_from_earliest, gaps_sorted_by_end):
        assert math.isclose(wrong(probe), 0.4)
    assert floor_division([(0.0, 0.0), (10.0, 10.0)]) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        my_idle_share,
        lambda iv: np.float64(my_idle_share(iv)),
        lambda iv: round(my_idle_share(iv), 12),
        lambda iv: np.float32(my_idle_share(np.array(iv, dtype=np.float32).tolist())),
    ],
    ids=["float", "numpy float", "rounded to 12 digits", "float32"],
)
def test_idle_share_right(answer, capsys):
    assert_ok(check_idle_share, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (
            lambda iv: timing.gpu_idle_share(
                [{"kind": "gpu", "name": "k", "start_us": a, "dur_us": b - a} for a, b in iv]
            ),
            ("gpu_idle_share", "write it"),
        ),
        (lambda iv: timing.gpu_idle_share(iv), ("raised", "gpu_idle_share", "write it")),
        (sorts_in_place, ("changed intervals", "sorted(intervals)")),
        (summed, ("overlap", "counted twice")),
        (unsorted_span, ("any order", "sort them")),
        (lambda iv: 100 * my_idle_share(iv), ("not a percentage",)),
        (lambda iv: 1 - my_idle_share(iv), ("busy share",)),
        (merge_with_last_end, ("latest end", "inside it")),
        (lambda iv: str(my_idle_share(iv)), ("a number from 0 to 1", "string", "not its text")),
        (span_to_the_last_start, ("expected",)),
        (lambda iv: round(my_idle_share(iv), 1), ("expected",)),
        (lambda iv: my_idle_share(iv) > 0.5, ("a number from 0 to 1",)),
        (lambda iv: None, ("returned None", "no `return` line", "the idle share")),
        (only_passes, ("returned None", "no `return` line", "the idle share")),
        (lambda iv: 0, ("0 on every case", "no kernel ever waits")),
        (lambda iv: 0.0, ("0 on every case", "no kernel ever waits")),
        (lambda iv: 1, ("1 on every case", "no kernel ever runs")),
        (lambda iv: [my_idle_share(iv)], ("a list of one number", "not a list")),
        (lambda iv: float("nan"), ("returned nan", "not a share")),
        (merge_in_list_order, ("counts on the list's order", "sorted(intervals)")),
        (idle_over_summed_durations, ("durations added up", "span")),
        (busy_over_summed_durations, ("durations added up", "span")),
        (idle_time, ("the idle time", "over the span")),
        (span_from_zero, ("as if the span started at 0", "earliest start")),
        (lambda iv: 1 - my_idle_share(iv), ("busy share", "1 minus it")),
        (lambda iv: round(my_idle_share(iv), 2), ("do not round",)),
        (lambda iv: round(my_idle_share(iv), 3), ("do not round",)),
        (lambda iv: math.floor(my_idle_share(iv) * 100) / 100, ("do not round",)),
        (lambda iv: torch.tensor(my_idle_share(iv)), ("tensor", "float")),
        (
            neighbour_gaps,
            (
                "the end of the kernel just before",
                "inside a longer one",
                "end = max(end, this kernel",
            ),
        ),
        (idle_over_latest_end, ("as if the span started at 0", "earliest start")),
        (mean_gap, ("mean gap", "over the span")),
        (sorted_by_end, ("sorted the intervals by their end", "Sort them by their start")),
        (sorted_by_end_from_earliest, ("by their end", "by their start", "sorted(intervals)")),
        (gaps_sorted_by_end, ("by their end", "by their start")),
        (floor_division, ("Floor division, //", "rounds the share down to 0", "Use /")),
        (at_least_half, ("that is an int", "a fraction from 0 to 1", "not a yes or no")),
        (lambda iv: round(my_idle_share(iv)), ("the int 0 on every case", "nor a whole number")),
        (lambda iv: round(my_idle_share(iv) + 0.3), ("that is an int", "nor a whole number")),
    ],
    ids=[
        "the package's own",
        "the package's own, handed the pairs",
        "sorts in place",
        "durations summed",
        "list order",
        "percent",
        "busy share",
        "last end, not the latest",
        "a string",
        "span to the last start",
        "rounded",
        "a bool",
        "return None",
        "only pass",
        "return 0",
        "return 0.0",
        "return 1",
        "a list",
        "nan",
        "merged in list order",
        "idle over the summed durations",
        "busy over the summed durations",
        "idle time, not its share",
        "span from 0",
        "busy share, 1 minus it",
        "rounded to 2 digits",
        "rounded to 3 digits",
        "floored to 2 digits",
        "a tensor",
        "gaps between neighbours",
        "idle time over the latest end",
        "the mean gap",
        "sorted by end",
        "sorted by end, the span from the earliest start",
        "gaps in end order",
        "floor division",
        "an int, 0 or 1",
        "rounded to an int",
        "rounded to an int, 0 or 1",
    ],  # fmt: skip
)
def test_idle_share_wrong(answer, needles, capsys):
    assert_hint(check_idle_share, answer, capsys, *needles)


# --- exercise 2: how many kernels a target asks for --------------------------------------------


def my_kernels_to_remove(step_us, target_us, us_per_node):
    return max(0, math.ceil((step_us - target_us) / us_per_node))


def test_the_count_is_the_gap_over_the_floor_rounded_up():
    assert _to_remove(55.7, 42.0, 0.898) == 16  # 15 kernels save 13.47 µs of the 13.7
    assert _to_remove(10.0, 9.0, 0.5) == 2 and _to_remove(40.0, 45.0, 0.9) == 0


def count_while_at_or_over(step_us, target_us, us_per_node):  # >=: one too many at the target
    n = 0
    while step_us - n * us_per_node >= target_us:
        n += 1
    return n


@pytest.mark.parametrize(
    "answer",
    [my_kernels_to_remove, lambda s, t, u: np.int64(my_kernels_to_remove(s, t, u))],
    ids=["int", "numpy int"],
)
def test_kernels_to_remove_right(answer, capsys):
    assert_ok(check_kernels_to_remove, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda s, t, u: math.floor((s - t) / u), ("Round up",)),
        (lambda s, t, u: round((s - t) / u), ("Round up",)),
        (lambda s, t, u: math.ceil((s - t) / u), ("already under", "No kernel")),
        (lambda s, t, u: (s - t) / u, ("whole number", "part of a kernel")),
        (lambda s, t, u: float(my_kernels_to_remove(s, t, u)), ("whole number", "4, not 4.0")),
        (lambda s, t, u: math.ceil(s / u), ("the whole step",)),
        (lambda s, t, u: max(0, round((s - t) / u + 0.5)), ("expected",)),
        (lambda s, t, u: None, ("returned None", "no `return` line", "an int")),
        (lambda s, t, u: 0, ("0 on every case", "at its target already")),
        (lambda s, t, u: 0.0, ("0, not 0.0",)),
        (lambda s, t, u: 1, ("1 on every case", "what one kernel saves")),
        (lambda s, t, u: str(my_kernels_to_remove(s, t, u)), ("the string '4'", "not its text")),
        (lambda s, t, u: [my_kernels_to_remove(s, t, u)], ("a list of one number", "not a list")),
        (lambda s, t, u: max(0, np.ceil((s - t) / u)), ("4, not 4.0", "np.ceil")),
        (lambda s, t, u: torch.tensor(my_kernels_to_remove(s, t, u)), ("a Python int",)),
        (lambda s, t, u: np.array(my_kernels_to_remove(s, t, u)), ("ndarray", "a Python int")),
        (lambda s, t, u: math.ceil(abs(s - t) / u), ("already under", "abs()")),
        (
            lambda s, t, u: max(0, math.ceil(u / (s - t))) if s != t else 0,
            ("divided the floor of a node by the time to save",),
        ),
        (lambda s, t, u: max(0, math.ceil((t - s) / u)), ("subtracted the other way",)),
        (lambda s, t, u: math.ceil((t - s) / u), ("subtracted the other way",)),
        (lambda s, t, u: max(0, math.ceil((s - t) * u)), ("multiplied", "divide by it")),
        (lambda s, t, u: max(0, math.ceil((s - t) / (u * 1000))), ("far too few", "all in µs")),
        (lambda s, t, u: max(0, math.ceil((s - t) / (u / 1000))), ("a thousand times", "µs")),
        (lambda s, t, u: max(0, math.ceil(math.floor(s - t) / u)), ("rounded the time to save",)),
        (lambda s, t, u: math.ceil(round(s - t) / u), ("rounded the time to save",)),
        (lambda s, t, u: math.ceil(math.ceil(s - t) / u), ("rounded the time to save",)),
        (lambda s, t, u: max(0, math.ceil((int(s) - int(t)) / u)), ("rounded the time to save",)),
        (lambda s, t, u: max(0, math.ceil(u / (s - t))), ("ZeroDivisionError", "at its target")),
        (count_while_at_or_over, ("At the target", "no kernel needs to go", ">=")),
        (
            lambda s, t, u: int((s - t) / u) + 1 if s > t else 0,
            ("2 kernels save 1 µs", "no more kernel needs to go", "int(x) + 1", "math.ceil"),
        ),
        (lambda s, t, u: max(0, int((s - t) / u) + 1), ("int(x) + 1", "At the target")),
    ],
    ids=[
        "floor",
        "nearest",
        "negative",
        "a float",
        "a whole float",
        "the whole step",
        "half up, rounded to even",
        "return None",
        "return 0",
        "return 0.0",
        "return 1",
        "a string",
        "a list",
        "np.ceil",
        "a tensor",
        "a 0-dim numpy array",
        "abs",
        "divided the wrong way",
        "subtracted the wrong way",
        "subtracted the wrong way, no max",
        "multiplied",
        "the floor of a node taken as ns",
        "the floor of a node taken as ms",
        "the time to save rounded first",
        "the time to save rounded to the nearest first, no max",
        "the time to save rounded up first, no max",
        "each time made an int first",
        "divided by a zero time to save",
        "a loop on >=",
        "int(x) + 1",
        "int(x) + 1, at the target",
    ],  # fmt: skip
)
def test_kernels_to_remove_wrong(answer, needles, capsys):
    assert_hint(check_kernels_to_remove, answer, capsys, *needles)


def test_kernels_to_remove_that_divides_the_step_by_its_target_is_told_so(capsys):
    assert_hint(check_kernels_to_remove, lambda s, t, u: math.ceil(s / t), capsys,
                "divided the step by its target", "step_us - target_us")  # fmt: skip


# --- exercise 3: the form a graph captures -----------------------------------------------------


def my_form(width, splits):
    most = math.ceil(width / splits)
    return "sums" if most <= 1 else "one pass" if most <= 4 else "pipelined"


def _form_of(most):  # a learner's rule from the blocks a split holds, however rounded
    return "sums" if most <= 1 else "one pass" if most <= 4 else "pipelined"


def test_the_forms_are_the_packages_rule():
    """The checker's reference names what kernels.tensor_cores and kernels.split_passes pick."""
    for width, splits in FORM_CASES + ((64, 4), (1, 1), (63, 16)):
        dot, (chunk, _) = tensor_cores(width, splits), split_passes(width, splits)
        want = "sums" if not dot else "one pass" if chunk >= -(-width // splits) else "pipelined"
        assert _form(width, splits) == want == my_form(width, splits)


def rounded_down(width, splits):
    most = width // splits
    return "sums" if most <= 1 else "one pass" if most <= 4 else "pipelined"


def four_is_long(width, splits):
    most = -(-width // splits)
    return "sums" if most <= 1 else "one pass" if most < 4 else "pipelined"


@pytest.mark.parametrize(
    "answer",
    [
        my_form,
        lambda w, s: "sums" if w / s <= 1 else "one pass" if w / s <= 4 else "pipelined",
        lambda w, s: (
            "sums"
            if (w + s - 1) // s == 1
            else "one pass"
            if (w + s - 1) // s <= 4
            else "pipelined"
        ),  # fmt: skip
    ],
    ids=["math.ceil", "w / s, unrounded: the same comparisons", "(w + s - 1) // s"],
)
def test_form_right(answer, capsys):
    assert_ok(check_form, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda w, s: tensor_cores(w, s) and "one pass" or "sums", ("package's own rule",)),
        (lambda w, s: split_passes(w, s) and "sums", ("package's own rule", "write it")),
        (rounded_down, ("rounded", "down", "round up")),
        (four_is_long, ("exactly 4 blocks", "one pass")),
        (
            lambda w, s: _form_of((w + s // 2) // s),
            ("to the nearest", "to the nearest", "left over", "round up"),
        ),
        (lambda w, s: _form_of(int(w / s + 0.5)), ("to the nearest", "round up")),
        (lambda w, s: _form_of(round(w / s)), ("to the nearest", "round up")),
        (
            lambda w, s: "one pass" if -(-w // s) <= 4 else "pipelined",
            ("one block takes the sums",),
        ),
        (lambda w, s: True, ("the bool True", "'sums'")),
        (lambda w, s: "Sums", ("'Sums'", "exactly one of")),
        (lambda w, s: None, ("None", "'one pass'")),
        (lambda w, s: 1 / 0, ("raised ZeroDivisionError",)),
        (lambda w: "sums", ("raised TypeError",)),
        (lambda w, s: "sums", ("expected 'one pass'",)),
        ("sums", ("pass your function itself",)),
    ],
    ids=[
        "the package's tensor_cores",
        "the package's split_passes",
        "rounded down",
        "four blocks taken as long",
        "to the nearest, halves up",
        "to the nearest, int(x + 0.5)",
        "to the nearest, Python's round",
        "never the sums",
        "a bool",
        "capitalised",
        "None",
        "raises",
        "one argument",
        "always the sums",
        "a string, not a function",
    ],
)
def test_form_wrong(answer, needles, capsys):
    assert_hint(check_form, answer, capsys, *needles)


def test_form_that_never_returns_is_stopped(capsys, monkeypatch):
    from tinyllm.course.exercises import nb11

    monkeypatch.setattr(nb11, "CALL_SECONDS", 0.5)

    def forever(width, splits):
        while True:
            pass

    assert_hint(check_form, forever, capsys, "did not finish")


# --- exercise 4: who combines --------------------------------------------------------------------


def my_combiner(order, splits, start):
    place = splits - 1 - start
    return order[place] if 0 <= place < len(order) else None


def clearing(order, splits, start):
    """Right, then empties the list it was given: the checker's cases must not change."""
    got = my_combiner(order, splits, start)
    order.clear()
    return got


def test_the_combiner_is_the_add_that_hands_back_shares_less_one():
    """The checker's reference, against the protocol played out: each program in turn adds one
    to a count that starts at `start`; the one handed back splits - 1 combines."""
    for order, splits, start in COMBINE_CASES + (([1, 2, 0], 3, 2), ([0, 1], 2, 1)):
        count, combined = start, None
        for program in order:
            if count == splits - 1:
                combined = program
            count += 1
        assert _combiner(order, splits, start) == combined == my_combiner(order, splits, start)


@pytest.mark.parametrize(
    "answer",
    [
        my_combiner,
        lambda o, s, c: o[s - 1 - c] if c < s else None,
        lambda o, s, c: next((p for k, p in enumerate(o) if c + k == s - 1), None),
        lambda o, s, c: np.int64(o[s - 1 - c]) if c < s else None,
        clearing,
    ],
    ids=[
        "the place in the order",
        "start below splits",
        "the adds played out",
        "a numpy int",
        "empties its order after",
    ],
)
def test_combiner_right(answer, capsys):
    assert_ok(check_combiner, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda o, s, c: o[-1], ("whatever the count held", "third add of four")),
        (lambda o, s, c: s - 1, ("highest split index",)),
        (lambda o, s, c: max(o), ("highest split index",)),
        (lambda o, s, c: s - 1 - c, ("place in the order", "order[place]")),
        (lambda o, s, c: o[s - 1 - c], ("return None", "negative index")),
        (lambda o, s, c: my_combiner(o, s, c) if c < s else -1, ("not -1",)),
        (lambda o, s, c: o[s - 1 + c], ("IndexError", "start + k")),
        (lambda o, s, c: (s - 1 - c) if c < s else None, ("place in the order",)),
        (lambda o, s, c: o[s - c] if c >= 1 and c <= s else None, ("one place late",)),
        (
            lambda o, s, c: o[s - 1 + c] if s - 1 + c < len(o) else None,
            ("where it should be subtracted", "splits - 1 - start"),
        ),
        (
            lambda o, s, c: o[s - 2 - c] if 0 <= s - 2 - c < len(o) else None,
            ("one place early", "after the add"),
        ),
        (lambda o, s, c: o[s - 2 - c] if c < s else None, ("one place early", "after the add")),
        (lambda o, s, c: o[0], ("first program to finish gets back `start`",)),
        (lambda o, s, c: np.array(o[s - 1 - c]) if c < s else None, ("ndarray", "an int")),
        (lambda o, s, c: o[s - 1 - c] if c < s else [][0], ("IndexError", "return None")),
        (lambda o, s, c: o[s - 1 - c] if c < s else 0, ("return None",)),
        (lambda o, s, c: None, ("None every time", "print is not a return")),
        (lambda o, s, c: str(my_combiner(o, s, c)), ("a str", "an int, or None")),
        (lambda o, s, c: True, ("the bool True",)),
        (lambda o, s, c: [my_combiner(o, s, c)], ("a list",)),
        (lambda o, s: 0, ("raised TypeError",)),
        (lambda o, s, c: 1 / 0, ("raised ZeroDivisionError",)),
        (1, ("pass your function itself",)),
    ],
    ids=[
        "the last to finish, start ignored",
        "the highest split",
        "max of the order",
        "the place, not the split",
        "a negative index left unchecked",
        "-1 for nobody",
        "the wrong direction",
        "the place, guarded",
        "one place off, guarded",
        "start's sign flipped, guarded",
        "the count compared after the add",
        "the count compared after the add, a negative index unguarded",
        "the first to finish",
        "a 0-dim numpy array",
        "raises for nobody",
        "0 for nobody",
        "None always",
        "a string",
        "a bool",
        "a list",
        "two arguments",
        "raises",
        "an int, not a function",
    ],
)
def test_combiner_wrong(answer, needles, capsys):
    assert_hint(check_combiner, answer, capsys, *needles)


def test_combiner_that_never_returns_is_stopped(capsys, monkeypatch):
    from tinyllm.course.exercises import nb11

    monkeypatch.setattr(nb11, "CALL_SECONDS", 0.5)

    def forever(order, splits, start):
        while True:
            pass

    assert_hint(check_combiner, forever, capsys, "did not finish")


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda s, t, u: max(0, math.ceil(s / u) - math.ceil(t / u)), ("Round up, once",)),
        (lambda s, t, u: round(s - math.ceil(max(0, s - t) / u) * u), ("that is a time",)),
        (
            lambda s, t, u: max(0, math.ceil((s - t) / t)),
            ("by the target", "Divide the time to save by us_per_node"),
        ),
        (
            lambda s, t, u: max(0, math.ceil((s - t) / u)) + 1 if s > t else 0,
            ("one kernel too many on every step", "add nothing after"),
        ),
        (lambda s, t, u: math.ceil(t / u), ("fit in the target", "step_us - target_us")),
        (lambda s, t, u: max(0, math.ceil(s - t)), ("the time to save, in µs", "us_per_node")),
        (
            lambda s, t, u: max(0, math.ceil((s - t) / (u * 1000))),
            ("far too few", "A unit may be off", "by us_per_node"),
        ),
    ],
    ids=[
        "each time rounded to kernels first",
        "the step's time after the removal",
        "the time to save over the target",
        "one added after rounding up",
        "the floors of a node in the target",
        "the time to save, not divided",
        "a unit off by a thousand",
    ],
)
def test_kernels_to_remove_more_mistakes(answer, needles, capsys):
    assert_hint(check_kernels_to_remove, answer, capsys, *needles)


def counted_modulo(order, splits, start):
    """Reads the count as wrapping round: count % splits == splits - 1."""
    count = start
    for p in order:
        if count % splits == splits - 1:
            return p
        count += 1
    return None


@pytest.mark.parametrize(
    "answer, needles",
    [
        (counted_modulo, ("return None", "never comes back round")),
        (lambda o, s, c: o[0] if c == 0 else None, ("gets back `start`",)),
        (
            lambda o, s, c: o.index(s - 1 - c) if c < s else None,
            ("order.index(splits - 1 - start)", "not a split index"),
        ),
        (lambda o, s, c: o[c] if c < s else None, ("order[start] is the program at place",)),
        (lambda o, s, c: 2, ("you return 2 on every case, whatever the order",)),
    ],
    ids=[
        "a count that wraps",
        "the first to finish, when the count starts at 0",
        "the place of a split, not the split at a place",
        "the program at place start",
        "one split whatever the order",
    ],
)
def test_combiner_more_mistakes(answer, needles, capsys):
    assert_hint(check_combiner, answer, capsys, *needles)


def test_form_with_one_block_added_after_rounding_down_is_told_so(capsys):
    assert_hint(check_form, lambda w, s: _form_of(w // s + 1), capsys, "one block too many")


def span_to_the_last_to_start(intervals):
    """The gaps merged right, over a span that ends where the last kernel to start ends."""
    spans = sorted(intervals)
    idle, end = 0.0, spans[0][0]
    for start, stop in spans:
        idle += max(0.0, start - end)
        end = max(end, stop)
    return idle / (spans[-1][1] - spans[0][0])


def test_idle_share_over_a_span_to_the_last_to_start_is_told_of_the_latest_end(capsys):
    assert_hint(check_idle_share, span_to_the_last_to_start, capsys, "need not end last")


def idle_from_zero(intervals):  # a merge whose end starts at 0: the time before the first is idle
    spans = sorted(intervals)
    idle, end = 0.0, 0.0
    for start, stop in spans:
        idle += max(0.0, start - end)
        end = max(end, stop)
    return idle / (end - spans[0][0])


def test_idle_share_counted_from_zero_is_told_where_the_span_starts(capsys):
    assert_hint(check_idle_share, idle_from_zero, capsys, "before the first kernel", "earliest")


def time_after_removal(s, t, u):  # the step's time once the kernels are gone, not their count
    return max(0, s - math.ceil((s - t) / u) * u)


def test_kernels_to_remove_given_the_time_after_is_told_it_is_a_time(capsys):
    assert_hint(check_kernels_to_remove, time_after_removal, capsys, "that is a time", "kernels")
