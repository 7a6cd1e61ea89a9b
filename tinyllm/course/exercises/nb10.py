"""Checkers of notebook 10 · the engine at 256 rows."""

import statistics

import numpy as np

from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    Verdict,
    call,
    check_cases,
    checker,
    hint,
    ok,
    shown_type,
    whole,
)


def _notwhole(got, what: str) -> str:
    return (f"returned {shown_type(got)}: return {what} as an int: int(...). The host counts "
            f"with it")  # fmt: skip


def _span(dirty) -> int:
    """Rows.flush's upload: rows 0 to the last row changed, 0 rows when none changed."""
    changed = [i for i, d in enumerate(dirty) if d]
    return changed[-1] + 1 if changed else 0


def _same_span(got, want, dirty, before) -> str | None:
    if not np.array_equal(dirty, before):
        return (
            "changed dirty, its input: the flush clears the marks itself, after its upload. "
            "Only read dirty here"
        )
    changed = [i for i, d in enumerate(dirty) if d]
    if got is None and not changed:
        return (
            "returned None, expected 0: no row changed, so the flush uploads 0 rows. "
            "Return the int 0 there"
        )
    if got is None:
        return "returned None: did you forget `return`?"
    n = whole(got)
    if n is None:
        return _notwhole(got, "the number of rows uploaded")
    if n == want:
        return None
    if not changed:
        return (
            f"returned {n}, expected 0: no row changed, so flush uploads nothing. Your "
            f"answer must handle a host twin with nothing marked"
        )
    if n == changed[-1] - changed[0] + 1 and changed[0] > 0:
        return (
            f"returned {n}, expected {want}: that span starts at the first changed row, "
            f"row {changed[0]}. The upload always starts at row 0"
        )
    if n == len(changed) and n != want:
        return (
            f"returned {n}, the number of rows that changed; expected {want}. The upload is "
            f"one copy of rows 0 to the last changed row, with the unchanged rows between "
            f"them: one copy cannot skip rows"
        )
    if n == 0 and changed == [0]:
        return (
            f"returned 0, expected {want}: row 0 changed, so the flush uploads row 0. If you "
            f"search from the end, does your loop reach row 0? range(len(dirty) - 1, 0, -1) "
            f"stops at row 1"
        )
    if n == 0:
        return (
            f"returned 0, expected {want}: row {changed[-1]} changed, so the flush uploads "
            f"rows 0 to {changed[-1]}. Does your loop reach every row? range(len(dirty) - 1) "
            f"stops before the last one"
        )
    if n == want - 1:
        return (
            f"returned {n}, expected {want}: that is the last changed row's index. Rows 0 to "
            f"{want - 1} are {want} rows: add one"
        )
    if n == changed[0] + 1 and len(changed) > 1:
        return (
            f"returned {n}, expected {want}: the upload ends at the first changed row there. "
            f"It must reach the last one, row {changed[-1]}"
        )
    if n == len(dirty):
        return (
            f"returned {n}, every row; expected {want}. Rows after the last changed one hold "
            f"what the device holds already: flush leaves them out"
        )
    return f"returned {n}, expected {want}: rows 0 to the last changed row"


def _explain_span(error: Exception, dirty) -> str | None:
    if isinstance(error, (IndexError, ValueError)) and not dirty.any():
        return "when no row changed there is no last changed row: the flush uploads 0 rows"
    return None


@checker
def check_flush_span(fn) -> Verdict:
    """fn(dirty) → how many rows of state Rows.flush uploads: rows 0 to the last row marked
    in dirty (a numpy bool array, one entry per row), or 0 when none is marked."""
    g = np.random.default_rng(0)
    cases = [
        [False, False, True, False, True, True, True, False, False],
        [True, False, False, False],
        [False, False, False, True],
        [True, True, True],
        [True],
        [False],
        [False] * 6,
        [False, False, True, True, False, True, False],
        list(g.random(32) < 0.1),
    ]
    for d in cases:
        dirty = np.array(d, dtype=bool)
        before, shown_as = dirty.copy(), f"dirty={dirty.astype(int).tolist()}"
        got = call(fn, (dirty,), shown_as, seconds=CALL_SECONDS, none_ok=True,
                   explain=lambda e, d=before: _explain_span(e, d))  # fmt: skip
        if got is FAILED:
            return False
        problem = _same_span(got, _span(before), dirty, before)
        if problem:
            return hint(f"on {shown_as} your function {problem}")
    return ok("one upload: rows 0 to the last changed row, however many changed")


def _admitted(free: int, waiting: int, min_admit: int) -> int:
    """PagedEngine.admit's count in one step: as many requests as fit, once min_admit rows are
    free, or as many rows as requests wait when fewer wait."""
    return min(free, waiting) if free >= min(waiting, min_admit) else 0


def _rechecked(free: int, waiting: int, min_admit: int) -> int:
    """The count of a loop that admits one request at a time and checks the threshold again
    before each: it stops once the free rows fall below min(waiting, min_admit)."""
    n = 0
    while waiting and free and free >= min(waiting, min_admit):
        n, free, waiting = n + 1, free - 1, waiting - 1
    return n


def _same_count(got, want, free, waiting, min_admit) -> str | None:
    n = whole(got)
    if n is None:
        return _notwhole(got, "how many requests to admit")
    if n == want:
        return None
    if n < 0:
        return (
            f"returned {n}, expected {want}: a count of requests is never negative. With "
            f"nothing to admit, return 0"
        )
    if n > free:
        return (
            f"returned {n}, expected {want}: only {free} rows are free, and each request "
            f"admitted takes a row"
        )
    if n > waiting:
        return (
            f"returned {n}, expected {want}: only {waiting} requests wait, and admit takes "
            f"requests from the queue"
        )
    if want == 0:
        return (  # here 0 < n <= free < min(waiting, min_admit): at least 2 rows
            f"returned {n}, expected 0: {waiting} requests wait and min_admit is {min_admit}, "
            f"but only {free} rows are free. Wait until {min(waiting, min_admit)} rows are "
            f"free: fewer, larger admissions"
        )
    if n == 0 and free == waiting < min_admit:
        return (
            f"returned 0, expected {want}: {waiting} requests wait and {free} rows are free, so "
            f"every waiting request fits now. Admit when free >= min(waiting, min_admit), "
            f"{waiting} here: waiting for min_admit rows keeps them waiting while rows sit idle"
        )
    if n == 0 and waiting < min_admit:
        return (
            f"returned 0, expected {want}: only {waiting} requests wait, fewer than "
            f"min_admit {min_admit}. Waiting for {min_admit} free rows keeps them waiting "
            f"while rows sit idle, until that many free up: wait for min(waiting, min_admit) "
            f"rows"
        )
    if n == 0:
        return (
            f"returned 0, expected {want}: {free} rows are free, and min_admit is "
            f"{min_admit}. With min_admit rows free or more, admit"
        )
    if n == min_admit:
        return (
            f"returned {n}, min_admit; expected {want}. Once admit admits, it takes as many "
            f"requests as fit: min(free, waiting)"
        )
    if n == free - min_admit and n == want - 1:
        return (
            f"returned {n}, expected {want}: one fewer than fit. Once admit admits, it takes "
            f"min(free, waiting). It keeps no row back for min_admit, and takes nothing away"
        )
    if n == free - min_admit:
        return (
            f"returned {n}, free - min_admit; expected {want}. min_admit is how many rows must "
            f"be free before admit starts, not rows kept back: then it takes min(free, waiting)"
        )
    if n == _rechecked(free, waiting, min_admit):
        return (
            f"returned {n}, expected {want}: once admit admits, it takes min(free, waiting) "
            f"at once. It does not check min_admit again after each request"
        )
    if abs(n - want) == 1:
        return (
            f"returned {n}, expected {want}: one off. Once admit admits, it takes every "
            f"request that fits, min(free, waiting), with nothing added or taken away"
        )
    return f"returned {n}, expected {want}"


@checker
def check_admit_count(fn) -> Verdict:
    """fn(free, waiting, min_admit) → how many requests PagedEngine.admit takes in one step,
    all ints."""
    cases = [
        (3, 5, 1),
        (0, 5, 1),
        (3, 2, 1),
        (10, 40, 16),
        (15, 40, 16),
        (16, 40, 16),
        (20, 40, 16),
        (20, 3, 16),
        (2, 3, 16),
        (3, 3, 16),
        (5, 0, 4),
        (256, 300, 16),
        (20, 40, 32),
        (40, 50, 32),
        (5, 3, 16),
    ]
    return check_cases(
        fn,
        [(c, f"free={c[0]}, waiting={c[1]}, min_admit={c[2]}") for c in cases],
        _admitted,
        "admit waits for min(waiting, min_admit) free rows, then takes as many as fit",
        _same_count,
        with_args=True,
    )


# --- exercise 3: a gain read against the spread -----------------------------------------------


def _shown(tok_s: float, baseline: float, runs) -> bool:
    """Whether tok_s over baseline is a gain larger than the spread of runs, the repeated
    runs of one engine: max(runs) / min(runs)."""
    return tok_s / baseline > max(runs) / min(runs)


def _mean(runs) -> float:
    return sum(runs) / len(runs)


MIDDLE = (
    "The spread is the fastest run over the slowest, max(runs) / min(runs): not a ratio to a "
    "middle value such as the mean or the median, nor a spread from the standard deviation"
)

AS_A_GAIN = (
    "Your function reads a loss as a gain, as abs(gain - 1) or max(gain, 1 / gain) do. The gain is "
    "tok_s / baseline_tok_s: below 1 it is a loss, however large, and no gain"
)


def _rounded(places: int, ordinal: str) -> tuple:
    """The reading that compares the gain and the spread rounded to `places` decimals."""
    return (lambda t, b, r: round(t / b, places) > round(max(r) / min(r), places),
            f"Compare the ratios as they are, not rounded: a gain and a spread may differ only "
            f"past the {ordinal} decimal")  # fmt: skip


# The answers learners give for a shown gain, each with what it got wrong. A wrong answer is
# told the first of these that gives its verdict on every case, since one case alone can
# match several.
WRONG_GAIN_READINGS = [
    (lambda t, b, r: t / b >= max(r) / min(r),
     "A gain equal to the spread is not larger than it: compare with >, not >="),
    _rounded(2, "second"),
    _rounded(3, "third"),
    (lambda t, b, r: t - b > max(r) - min(r),
     "Compare ratios, not differences: tok/s over tok/s, max over min"),
    (lambda t, b, r: t / b > r[-1] / r[0],
     "runs come in no order: the spread is max(runs) / min(runs), not the last over the first"),
    (lambda t, b, r: t / b > r[0] / r[-1],
     "runs come in no order: the spread is max(runs) / min(runs), not the first over the last"),
    (lambda t, b, r: b / t > max(r) / min(r),
     "The gain is tok_s / baseline_tok_s, the new engine's rate over the old one's, not "
     "baseline over tok_s. Below 1 it is a loss, however large, and no gain"),
    (lambda t, b, r: abs(t / b - 1) > max(r) / min(r) - 1, AS_A_GAIN),
    (lambda t, b, r: max(t / b, b / t) > max(r) / min(r), AS_A_GAIN),
    (lambda t, b, r: t / b > max(r[:2]) / min(r[:2]),
     "The spread takes every run, not the first two: max(runs) / min(runs)"),
    (lambda t, b, r: t / b > 1,
     "A gain above 1 is not enough: it must be larger than the spread, max(runs) / min(runs)"),
    (lambda t, b, r: t / b > min(r) / max(r),
     "The spread is the fastest run over the slowest, max(runs) / min(runs): at least 1"),
    (lambda t, b, r: t / b > max(r) / min(r) - 1,
     "The spread is the ratio itself, max(runs) / min(runs), not that minus 1: compare it "
     "with the gain tok_s / baseline_tok_s"),
    (lambda t, b, r: t / b > max(r) / _mean(r) or t / b > _mean(r) / min(r),
     MIDDLE),
    (lambda t, b, r: t / b > max(r) / _mean(r),
     MIDDLE),
    (lambda t, b, r: t / b > _mean(r) / min(r),
     MIDDLE),
    (lambda t, b, r: t / b - 1 > (max(r) - min(r)) / _mean(r),
     MIDDLE),
    (lambda t, b, r: t / b - 1 > (max(r) - min(r)) / max(r),
     "The spread is max(runs) / min(runs): the slowest run is its base, not the fastest"),
    (lambda t, b, r: (t / b - 1) * 100 > max(r) / min(r),
     "That compares a percentage with a ratio. Compare like with like: the gain "
     "tok_s / baseline_tok_s with the spread max(runs) / min(runs)"),
    (lambda t, b, r: t / b - 1 > max(r) / min(r),
     "That compares the gain less 1, a fraction, with the spread as a ratio. Compare like with "
     "like: tok_s / baseline_tok_s with max(runs) / min(runs)"),
    (lambda t, b, r: t / b > (max(r) / min(r) - 1) * 100,
     "That compares a ratio with a percentage. Compare like with like: the gain "
     "tok_s / baseline_tok_s with the spread max(runs) / min(runs)"),
]  # fmt: skip


def _told(verdicts: list[bool]) -> str:
    """What a learner's verdicts on GAIN_CASES got wrong: the first WRONG_GAIN_READINGS that
    gives every one of them, or the rule itself."""
    for reading, told in WRONG_GAIN_READINGS:
        if all(reading(*case) == v for case, v in zip(GAIN_CASES, verdicts)):
            return told
    return (
        "A gain is shown when tok_s / baseline_tok_s > max(runs) / min(runs): the fastest run "
        "over the slowest, at least 1"
    )


def _explain_spread(e: Exception) -> str | None:
    """A hint for an error a spread of one run raises, or None."""
    if isinstance(e, statistics.StatisticsError | ZeroDivisionError):
        return (f"one run has no standard deviation, or a difference of 0. {MIDDLE}. For one "
                f"run it is 1")  # fmt: skip
    return None


GAIN_CASES = [  # (tok_s, baseline_tok_s, runs)
    (250_000.0, 180_000.0, [240_000.0, 251_000.0, 262_000.0]),
    (78_000.0, 75_000.0, [74_000.0, 80_000.0, 77_000.0]),
    (110.0, 100.0, [100.0, 110.0]),
    (100.0, 120.0, [90.0, 95.0, 93.0]),
    (300.0, 100.0, [130.0, 100.0, 120.0]),
    (102.0, 100.0, [101.0, 100.0]),
    (500.0, 400.0, [400.0, 420.0, 480.0]),
    (200.0, 100.0, [300.0, 400.0, 350.0]),  # the spread of another engine, at its own scale
    (130.0, 100.0, [140.0, 100.0, 120.0]),  # runs in no order: max over min, not last / first
    (1034.0, 1000.0, [1000.0, 1030.0]),  # 1.034 over 1.03: both 1.03 when rounded to 2 places
    # the cases below tell the wrong readings apart (WRONG_GAIN_READINGS)
    (130.0, 100.0, [100.0, 140.0]),
    (130.0, 100.0, [140.0, 100.0]),
    (98.0, 100.0, [97.0, 100.0]),
    (80.0, 100.0, [97.0, 100.0]),
    (101.0, 100.0, [100.0, 110.0]),
    (119.0, 100.0, [100.0, 120.0]),
    (115.0, 100.0, [100.0, 120.0]),
    (105.0, 100.0, [100.0]),  # one run: its spread is 1
    (125.0, 100.0, [100.0, 110.0, 130.0]),  # the third run decides
    (100.5, 100.0, [100.0, 100.2]),  # a gain of 0.5 %, over a spread of 1.002
    (100.04, 100.0, [100.0, 100.03]),  # 1.0004 over 1.0003: both 1.0 when rounded to 3 places
]


@checker
def check_gain_shown(fn) -> Verdict:
    """fn(tok_s, baseline_tok_s, runs) → whether tok_s over baseline_tok_s is a gain larger
    than the spread of runs, the tok/s of repeated runs of one engine (max over min)."""
    verdicts = []
    for tok_s, baseline, runs in GAIN_CASES:
        given = list(runs)
        shown_as = f"tok_s={tok_s:g}, baseline_tok_s={baseline:g}, runs={runs}"
        got = call(fn, (tok_s, baseline, given), shown_as, seconds=CALL_SECONDS,
                   explain=_explain_spread)  # fmt: skip
        if got is FAILED:
            return False
        if given != runs:
            return hint(
                f"on {shown_as} your function changed runs, its input (a sort in place?). "
                f"Read it, or sort a copy: sorted(runs)"
            )
        if not isinstance(got, (bool, np.bool_)):
            return hint(f"on {shown_as} your function returned {shown_type(got)}: return True "
                        f"or False")  # fmt: skip
        verdicts.append(bool(got))
    for (tok_s, baseline, runs), got in zip(GAIN_CASES, verdicts):
        want = _shown(tok_s, baseline, runs)
        if got != want:
            gain, spread = tok_s / baseline, max(runs) / min(runs)
            digits = next((k for k in range(4, 17) if f"{gain:.{k}g}" != f"{spread:.{k}g}"), 4)
            return hint(
                f"on tok_s={tok_s:g}, baseline_tok_s={baseline:g}, runs={runs} your function "
                f"returned {got}, expected {want}: the gain is {gain:.{digits}g}, the spread "
                f"{spread:.{digits}g}. {_told(verdicts)}"
            )
    return ok("a gain is shown only when it is larger than the spread of repeated runs")
