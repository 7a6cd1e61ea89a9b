"""tinyllm.course.exercises.nb10: the checkers of notebook 10's exercises (the rows one flush
uploads, the requests one admission takes).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK].
"""

import statistics

import numpy as np
import pytest
import torch
from conftest import assert_hint, assert_ok

from tinyllm import PagedEngine, Rows
from tinyllm.course.exercises import check_admit_count, check_flush_span, check_gain_shown, nb10
from tinyllm.course.exercises.nb10 import _admitted, _span

# --- exercise 1: the rows one flush uploads --------------------------------------------------


def my_span(dirty):
    changed = np.flatnonzero(dirty)
    return int(changed[-1]) + 1 if len(changed) else 0


def clears_its_marks(dirty):
    last = my_span(dirty)
    dirty[:last] = False  # as flush does, after its upload
    return last


def test_the_span_is_what_flush_uploads():
    """The reference is Rows.flush's upload: past the moves' part, rows 0 to the last row
    marked, each row's columns; nothing at all when no row is marked."""
    rows = Rows(6, max_len=32, device="cpu")
    sizes = []
    rows.upload = lambda flat: sizes.append(len(flat))
    width = rows.host.state.shape[1]
    for marked in ([1, 4], [0], [5], [2, 3], []):
        rows.host.dirty[:] = False
        rows.host.dirty[marked] = True
        dirty, before = rows.host.dirty.copy(), len(sizes)
        rows.flush()
        if _span(dirty):
            assert sizes[-1] == len(rows.unmoved) + _span(dirty) * width
        else:
            assert len(sizes) == before  # nothing uploaded
    assert _span([False, True, False, True, False]) == 4 and _span([False] * 3) == 0


@pytest.mark.parametrize(
    "answer",
    [
        my_span,
        lambda d: max((i + 1 for i, x in enumerate(d) if x), default=0),
        lambda d: np.int64(my_span(d)),
        lambda d: len(d) - int(np.argmax(d[::-1])) if d.any() else 0,
    ],
    ids=["flatnonzero", "generator", "numpy int", "argmax from the end"],
)
def test_span_right(answer, capsys):
    assert_ok(check_flush_span, answer, capsys)


def misses_the_last_row(dirty):
    last = 0
    for i in range(len(dirty) - 1):  # stops before the last row
        if dirty[i]:
            last = i + 1
    return last


def skips_row_0(dirty):
    for i in range(len(dirty) - 1, 0, -1):  # stops at row 1
        if dirty[i]:
            return i + 1
    return 0


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda d: int(d.sum()), ("number of rows that changed", "one copy")),
        (lambda d: int(np.flatnonzero(d)[-1]) if d.any() else 0, ("add one",)),
        (lambda d: int(np.flatnonzero(d)[-1]) + 1, ("IndexError", "uploads 0 rows")),
        (lambda d: int(np.argmax(d)) + 1, ("first changed row",)),
        (lambda d: len(d), ("every row", "leaves them out")),
        (lambda d: len(d) - int(np.argmax(d[::-1])), ("no row changed", "expected 0")),
        (lambda d: float(my_span(d)), ("float", "as an int")),
        (lambda d: bool(d.any()), ("bool",)),
        (lambda d: np.flatnonzero(d), ("as an int",)),
        (lambda d: torch.tensor(my_span(d)), ("tensor", "as an int")),
        (lambda d: np.array([my_span(d)]), ("array", "as an int")),
        (lambda d: torch.as_tensor(d).nonzero()[-1] + 1 if d.any() else 0, ("as an int",)),
        (clears_its_marks, ("changed dirty",)),
        (
            lambda d: int(np.flatnonzero(d)[-1] - np.flatnonzero(d)[0]) + 1 if d.any() else 0,
            ("first changed row", "starts at row 0"),
        ),
        (lambda d: int(np.where(d)[1][-1]) + 1 if d.any() else 0, ("IndexError",)),
        (
            lambda d: int(np.flatnonzero(d)[-1]) + 1 if d.any() else None,
            ("returned None, expected 0", "no row changed", "Return the int 0"),
        ),
        (skips_row_0, ("row 0 changed", "does your loop reach row 0")),
        (lambda d: 1 if len(d) == 1 else my_span(d), ("dirty=[0]", "expected 0")),
        (misses_the_last_row, ("dirty=[0, 0, 0, 1]", "range(len(dirty) - 1) stops before")),
        (lambda d: str(my_span(d)), ("str", "as an int")),
        (
            lambda d: int(np.flatnonzero(d)[-1]) + 1 if len(d) > 1 and d.any() else 0,
            ("dirty=[1]", "expected 1"),
        ),
    ],
    ids=[
        "counted",
        "last index",
        "empty",
        "first changed",
        "every row",
        "argmax on none",
        "float",
        "bool",
        "the indices",
        "0-d tensor",
        "numpy array",
        "(1,) tensor",
        "clears the marks",
        "from the first changed row",
        "an IndexError with rows changed",
        "None when none changed",
        "a loop that skips row 0",
        "one row taken as changed",
        "a loop that misses the last row",
        "str",
        "one row left out",
    ],  # fmt: skip
)
def test_span_wrong(answer, needles, capsys):
    assert_hint(check_flush_span, answer, capsys, *needles)


# --- exercise 2: how many requests one admission takes -----------------------------------------


def my_count(free, waiting, min_admit):
    if free < min(waiting, min_admit):
        return 0
    return min(free, waiting)


def test_the_count_is_what_admit_takes(toy_model):
    """The reference is PagedEngine.admit: with n free rows, w waiting and min_admit m, one
    step's admission takes _admitted(n, w, m) requests. A first admission fills some rows."""
    scenarios = (
        (4, 1, 0, 6),
        (4, 4, 0, 6),
        (8, 4, 0, 3),
        (4, 4, 0, 2),
        (8, 4, 6, 5),
        (8, 4, 4, 3),
        (8, 8, 5, 2),
    )  # n_rows, min_admit, first, then
    for n_rows, min_admit, first, then in scenarios:
        engine = PagedEngine(toy_model, n_rows, max_len=32, use_graph=False, min_admit=min_admit)
        for n in (first, then):
            for _ in range(n):
                engine.submit([1, 2, 3], 8)
            free, waiting = len(engine.rows.free_rows()), engine.n_waiting()
            engine.admit()
            assert waiting - engine.n_waiting() == _admitted(free, waiting, min_admit)


@pytest.mark.parametrize(
    "answer",
    [
        my_count,
        lambda f, w, m: min(f, w) if f >= min(w, m) else 0,
        lambda f, w, m: np.int64(my_count(f, w, m)),
    ],
    ids=["ifs", "one line", "numpy int"],
)
def test_count_right(answer, capsys):
    assert_ok(check_admit_count, answer, capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda f, w, m: min(f, w), ("min_admit is 16", "fewer, larger")),
        (
            lambda f, w, m: min(f, w) if f >= m else 0,
            ("keeps them waiting while rows sit idle", "min(waiting, min_admit)"),
        ),
        (lambda f, w, m: f if f >= min(w, m) else 0, ("only 2 requests wait",)),
        (lambda f, w, m: w if f >= min(w, m) else 0, ("only 3 rows are free",)),
        (lambda f, w, m: min(f, w) if f > min(w, m) else 0, ("With min_admit rows free",)),
        (lambda f, w, m: min(f, w, m) if f >= min(w, m) else 0, ("as many requests as fit",)),
        (lambda f, w, m: f >= min(w, m), ("bool",)),
        (lambda f, w, m: float(my_count(f, w, m)), ("float",)),
        (lambda f, w, m: torch.tensor(my_count(f, w, m)), ("tensor", "as an int")),
        (lambda f, w, m: np.array([my_count(f, w, m)]), ("array", "as an int")),
        (lambda f, w, m: min(f, w) if f >= min(w, m, 16) else 0, ("min_admit is 32",)),
        (
            lambda f, w, m: min(f, w) if f >= m or f > w else 0,
            ("every waiting request fits", "free >= min(waiting, min_admit)"),
        ),
        (lambda f, w, m: min(f, w) if f >= 1 else 0, ("Wait until 16 rows are free",)),
        (
            lambda f, w, m: min(f, w) if f >= m or f == w else 0,
            ("free=5, waiting=3", "min(waiting, min_admit)"),
        ),
    ],
    ids=[
        "no min_admit",
        "holds back the last",
        "more than wait",
        "more than free",
        "one free row too many",
        "min_admit at a time",
        "bool",
        "float",
        "tensor",
        "numpy array",
        "min_admit capped at 16",
        "all waiting fit, yet it waits",
        "admits at one free row",
        "only when free equals waiting",
    ],  # fmt: skip
)
def test_count_wrong(answer, needles, capsys):
    assert_hint(check_admit_count, answer, capsys, *needles)


def test_count_waiting_for_one_row_fewer_than_min_admit_gets_a_hint(capsys):
    assert_hint(check_admit_count, lambda f, w, m: min(f, w) if f >= min(w, m - 1) else 0,
                capsys, "Wait until 16 rows are free")  # fmt: skip


def test_gain_readings_are_told_apart():
    """Each wrong reading gives another verdict vector on GAIN_CASES, and none is right, so a
    learner is told the mistake their answers show (readings that share a hint aside)."""
    verdicts = {}
    for reading, told in nb10.WRONG_GAIN_READINGS:
        v = tuple(bool(reading(*case)) for case in nb10.GAIN_CASES)
        assert v != tuple(nb10._shown(*case) for case in nb10.GAIN_CASES)
        assert verdicts.setdefault(v, told) == told


def test_span_whose_index_error_has_changed_rows_is_not_told_none_changed(capsys):
    out = assert_hint(check_flush_span, lambda d: int(np.where(d)[1][-1]) + 1, capsys,
                      "IndexError")  # fmt: skip
    assert "uploads 0 rows" not in out


def test_span_whose_empty_case_raises_a_value_error_is_told_to_return_0(capsys):
    assert_hint(check_flush_span, lambda d: int(np.max(np.where(d)[0])) + 1, capsys,
                "ValueError", "uploads 0 rows")  # fmt: skip


# --- exercise 3: a gain read against the spread -----------------------------------------------


def my_gain_shown(tok_s, baseline_tok_s, runs):
    return tok_s / baseline_tok_s > max(runs) / min(runs)


def test_the_verdict_is_the_notebooks_reading():
    """The reference reads 10's recording as the notebook does: a gain at 128 and 256 rows,
    none at 32."""
    from tinyllm.course.viz.engine import scale_groups
    from tinyllm.lab.results import load_engine_scale

    scale = load_engine_scale()
    runs = scale_groups(scale)["PagedEngine"]
    new = {r["n_rows"]: r for r in scale["rows"]}
    old = {r["n_rows"]: r for r in scale["before"]}
    spread_runs = {n: [r["tok_s"] for r in runs if r["n_rows"] == n] for n in old}
    shown = {n: nb10._shown(new[n]["tok_s"], old[n]["tok_s"], spread_runs[n]) for n in old}
    assert shown == {32: False, 128: True, 256: True}


def test_gain_shown_right(capsys):
    assert_ok(check_gain_shown, my_gain_shown, capsys)
    assert_ok(check_gain_shown, lambda t, b, r: bool(np.float64(t / b) > max(r) / min(r)), capsys)


def sorts_in_place(t, b, r):
    r.sort()
    return t / b > r[-1] / r[0]


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda t, b, r: t / b >= max(r) / min(r), ("equal to the spread", "with >, not >=")),
        (lambda t, b, r: b / t > max(r) / min(r), ("a loss, however large",)),
        (lambda t, b, r: t / b > max(r) / (sum(r) / len(r)), ("middle value", "the mean")),
        (lambda t, b, r: t - b > max(r) - min(r), ("not differences",)),
        (lambda t, b, r: t / b > r[-1] / r[0], ("no order", "not the last over the first")),
        (lambda t, b, r: t / b > r[0] / r[-1], ("no order", "not the first over the last")),
        (lambda t, b, r: round(t / b, 2) > round(max(r) / min(r), 2), ("not rounded",)),
        (lambda t, b, r: t / b > min(r) / max(r), ("at least 1",)),
        (lambda t, b, r: t / b > max(r) / min(r) - 1, ("not that minus 1",)),
        (lambda t, b, r: t / b - 1 > (max(r) - min(r)) / (sum(r) / len(r)), ("middle value",)),
        (lambda t, b, r: t / b - 1 > (max(r) - min(r)) / max(r), ("not the fastest",)),
        (sorts_in_place, ("changed runs", "sorted(runs)")),
        (lambda t, b, r: len(r) > 1 and t / b > max(r) / min(r), ("runs=[100.0]",)),
        (lambda t, b, r: t / b > max(r[:2]) / min(r[:2]), ("not the first two",)),
        (lambda t, b, r: t / b > statistics.median(r) / min(r), ("middle value",)),
        (lambda t, b, r: t / b > 1, ("above 1 is not enough",)),
        (lambda t, b, r: "yes" if t / b > max(r) / min(r) else "no", ("True or False",)),
        (lambda t, b, r: t / b - max(r) / min(r), ("True or False",)),
        (lambda t, b, r: nb10._shown(t, b, r) and None, ("return",)),
        (lambda t, b, r: (t - b) / b * 100 > max(r) / min(r), ("a percentage with a ratio",)),
        (lambda t, b, r: t / b > (max(r) / min(r) - 1) * 100, ("a ratio with a percentage",)),
        (lambda t, b, r: t / b - 1 > max(r) / min(r), ("the gain less 1",)),
    ],
    ids=[">=", "inverted gain", "spread over the mean", "differences", "last over first",
         "first over last", "rounded", "min over max", "spread minus 1", "relative to the mean",
         "relative to the fastest", "sorted in place", "one run", "first two", "median", "any gain",
         "a string", "a float", "None", "percentage gain", "percentage spread",
         "gain less 1"],
)  # fmt: skip
def test_gain_shown_wrong(answer, needles, capsys):
    assert_hint(check_gain_shown, answer, capsys, *needles)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda f, w, m: min(f, w) if f >= min(w, m) and w else -1, ("never negative", "return 0")),
        (lambda f, w, m: max(0, min(f, w) - 1) if f >= min(w, m) and w else 0, ("one fewer",)),
        (lambda f, w, m: max(0, f - m) if f >= min(w, m) and w else 0, ("keeps no row back",)),
    ],
    ids=["-1 for none", "one fewer", "min_admit kept back"],
)
def test_count_more_mistakes(answer, needles, capsys):
    assert_hint(check_admit_count, answer, capsys, *needles)


def test_gain_from_the_standard_deviation_of_one_run_gets_a_hint(capsys):
    def by_stdev(t, b, r):
        return t / b - 1 > statistics.stdev(r) / statistics.mean(r)

    assert_hint(check_gain_shown, by_stdev, capsys, "no standard deviation", "For one run it is 1")


def test_the_inverted_gain_is_told_which_way_round(capsys):
    assert_hint(check_gain_shown, lambda t, b, r: b / t > max(r) / min(r), capsys,
                "not baseline over tok_s")  # fmt: skip


def admit_one_at_a_time(free, waiting, min_admit):  # checks the threshold again each request
    n = 0
    while waiting and free and free >= min(waiting, min_admit):
        n, free, waiting = n + 1, free - 1, waiting - 1
    return n


def test_count_that_checks_min_admit_again_each_request_is_told_it_takes_all_at_once(capsys):
    assert_hint(check_admit_count, admit_one_at_a_time, capsys, "at once", "again")


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda t, b, r: round(t / b, 3) > round(max(r) / min(r), 3), ("third decimal", "1.0004")),
        (lambda t, b, r: abs(t / b - 1) > max(r) / min(r) - 1, ("reads a loss as a gain",)),
        (lambda t, b, r: max(t / b, b / t) > max(r) / min(r), ("reads a loss as a gain",)),
    ],
    ids=["rounded to 3 places", "abs of the gain less 1", "the larger of gain and its inverse"],
)
def test_gain_read_from_a_rounding_or_a_loss_as_a_gain_gets_a_hint(answer, needles, capsys):
    assert_hint(check_gain_shown, answer, capsys, *needles)
