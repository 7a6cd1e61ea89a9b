"""Checkers of notebook 07 · graphs and torch.compile.

Each checker first asks whether the answer is right; only a wrong one is taken apart for the
hint that names the mistake (one step per graph, every bucket, the key count off by one,
dynamic=None read as "one graph", the intercept forgotten, ...). A learner's own function
gets TIME_LIMIT_S per call; exercise 2's run is the notebook's and compiles for many seconds,
so it gets none.
"""

import math
from numbers import Integral

from tinyllm.course.exercises.harness import (
    FAILED,
    Verdict,
    as_int,
    as_number,
    call,
    checker,
    hint,
    items,
    ok,
    time_limit,
)
from tinyllm.course.exercises.harness import shown as shown_value
from tinyllm.course.viz import sig3
from tinyllm.graphs import bucket_for

TIME_LIMIT_S = 5.0  # per call of a learner's function: its answer is arithmetic


def call_in_time(fn, args: tuple, shown: str):
    """call(fn, args, shown), interrupted into a hint after TIME_LIMIT_S."""
    with time_limit(TIME_LIMIT_S, f"your function did not finish within {TIME_LIMIT_S:g} s"):
        return call(fn, args, shown)


# --- exercise 1: one compiled graph per window ---------------------------------------------

COMPILE_CASES = [  # (start, steps, buckets): the edge of a bucket before position 0, so that
    (10, 100, (32, 64, 128, 256)),  # counting p keys instead of p + 1 gets its own hint
    (31, 2, (32, 64, 128)),
    (0, 1, (128, 1024)),
    (31, 1, (32, 64, 128)),
    (127, 2, (128, 256)),
    (40, 300, (64, 128, 256, 512)),
    (500, 20, (128, 256, 512, 1024)),
    (500, 20, (1024,)),
]


def windows_visited(start: int, steps: int, buckets) -> set[int]:
    """The windows of the steps at positions start .. start + steps - 1: the step at
    position p attends over p + 1 keys."""
    return {bucket_for(p + 1, buckets) for p in range(start, start + steps)}


def is_count(x) -> bool:
    """A whole number of an integer type: int, numpy's, a one-element integer tensor."""
    return as_int(x) is not None


def compile_count_mistake(got, start: int, steps: int, buckets) -> str:
    """The hint for a wrong count on one case: the mistake it matches, or the windows."""
    shown = f"start={start}, steps={steps}, buckets={buckets}: you said {shown_value(got)}"
    visited = sorted(windows_visited(start, steps, buckets))
    if got == steps:
        return (
            f"{shown}, one graph per step. Dynamo compiles again only when a guard fails; "
            f"steps in the same window pass the guards of that window's graph"
        )
    if got == len(buckets):
        return (
            f"{shown}, one graph per bucket. Only the windows the steps visit are compiled, "
            f"each at its first step"
        )
    if got == len({bucket_for(max(p, 1), buckets) for p in range(start, start + steps)}):
        return (
            f"{shown}: the step at position p attends over p + 1 keys (the new token's key "
            f"is written first), so its window is bucket_for(p + 1, buckets)"
        )
    if got == len(windows_visited(start, steps + 1, buckets)):
        return (
            f"{shown}: `steps` steps from position {start} end at position "
            f"{start + steps - 1}, not {start + steps}"
        )
    ends = {bucket_for(start + 1, buckets), bucket_for(start + steps, buckets)}
    if got in (len(visited) - 1, len(ends)):  # the changes between windows; the two ends only
        return (
            f"{shown}: count every window the steps visit, each once, the first and the last "
            f"and any between them; not the changes between them: {visited}"
        )
    return (
        f"{shown}. Dynamo compiles once per distinct window: which windows do the "
        f"positions {start}..{start + steps - 1} use?"
    )


@checker
def check_compile_count(fn) -> Verdict:
    """fn(start, steps, buckets) → how many graphs Dynamo compiles (dynamic=False) for
    `steps` static decode steps from position `start` with these buckets."""
    for start, steps, buckets in COMPILE_CASES:  # the first case that goes wrong, says why
        shown = f"start={start}, steps={steps}, buckets={buckets}"
        got = call_in_time(fn, (start, steps, buckets), shown)
        if got is FAILED:
            return False
        if not is_count(got):
            return hint(
                f"{shown}: return an int (a number of graphs), not {type(got).__name__} "
                f"{shown_value(got)}"
            )
        got = as_int(got)
        if got != len(windows_visited(start, steps, buckets)):
            return hint(compile_count_mistake(got, start, steps, buckets))
    return ok("one compiled graph per window the decode visits")


# --- exercise 2: predict, then run the counting backend ------------------------------------


def predicted_graphs(windows) -> tuple[int, int]:
    """What the rule predicts for one decode step in each of `windows`, in order:
    (graphs with dynamic=False, graphs with dynamic=None). dynamic=False compiles each
    distinct window once; dynamic=None compiles the first window as it is, recompiles at
    the first other window with the window symbolic, and that graph serves the rest."""
    n = len(set(windows))
    return n, min(n, 2)


@checker
def check_compile_prediction(prediction, run, prompt_lens, buckets) -> Verdict:
    """prediction: (graphs with dynamic=False, graphs with dynamic=None) when one request of
    each prompt length in prompt_lens decodes one step with these buckets, predicted before
    anything runs; run(dynamic) → the graphs the counting backend counted, called only once
    the prediction is a pair of ints."""
    lens = items(prompt_lens)
    if lens is None or not lens or not all(is_count(n) for n in lens):
        return hint(f"prompt_lens must be the cell's list of prompt lengths, ints; got "
                    f"{shown_value(prompt_lens)}")  # fmt: skip
    try:
        windows = [bucket_for(as_int(n) + 1, buckets) for n in lens]
    except ValueError as e:
        return hint(f"buckets must be the cell's buckets, a tuple of ints: {e}")
    if prediction is None:
        return hint(
            "not answered yet: set prediction to a pair, (graphs with dynamic=False, "
            "graphs with dynamic=None); the cell runs the compiler only after that"
        )
    if (
        not isinstance(prediction, (tuple, list))
        or len(prediction) != 2
        or not all(is_count(x) for x in prediction)
    ):
        return hint(
            f"predict a pair of ints, (graphs with dynamic=False, graphs with dynamic=None), "
            f"e.g. (2, 2); got {shown_value(prediction)}"
        )
    measured = []
    for dynamic in (False, None):
        got = call(run, (dynamic,), f"dynamic={dynamic}")
        if got is FAILED:
            return False
        if not is_count(got):
            return hint(
                f"run(dynamic={dynamic}) must return the number of graphs, got {shown_value(got)}"
            )
        measured.append(as_int(got))
    measured = tuple(measured)
    static, dynamic = (as_int(x) for x in prediction)
    if (static, dynamic) == measured:
        return ok(
            f"windows {windows}: {static} graphs with dynamic=False (one per distinct "
            f"window), {dynamic} with dynamic=None (the first window as it is, then one "
            f"graph with the window symbolic)"
        )
    if (dynamic, static) == measured:
        return hint(
            "the right numbers in the wrong order: the first is dynamic=False, "
            "the second dynamic=None"
        )
    if static != measured[0]:
        if static == len(windows):
            return hint(
                f"dynamic=False: {static} is one graph per request. Requests whose steps "
                f"share a window pass that graph's guards"
            )
        if static == len(buckets):
            return hint(
                f"dynamic=False: {static} is one graph per bucket. Only the windows the "
                f"steps use are compiled, each the first time it is met"
            )
        return hint(
            f"dynamic=False: you predicted {static}, Dynamo compiled {measured[0]}. "
            f"Count the distinct windows: a request of prompt length n decodes its step "
            f"over n + 1 keys"
        )
    if dynamic == static and len(set(windows)) > 2:
        return hint(
            f"dynamic=None: you predicted {dynamic}, as for dynamic=False; Dynamo compiled "
            f"{measured[1]}. At the first recompile for a new window, dynamic=None makes "
            f"the window symbolic: one graph then serves every later window"
        )
    if dynamic == 1 and len(set(windows)) > 1:
        return hint(
            f"dynamic=None: you predicted 1, Dynamo compiled {measured[1]}. Its first graph "
            f"is specialized: a size becomes symbolic only once Dynamo has seen it change"
        )
    return hint(
        f"dynamic=None: you predicted {dynamic}, Dynamo compiled {measured[1]} for the "
        f"windows {windows}: the first window compiles as it is, the first other window "
        f"once more, symbolically"
    )


# --- exercise 3: the cost model -------------------------------------------------------------


def fit_cases(res: dict) -> list[tuple[int, dict]]:
    """(kernels, fit) pairs: made-up fits first (an intercept, a slope, zero kernels), then
    the recorded fit at every recorded point's kernel count."""
    made_up = [  # residuals that do not add up to 0, so that adding them is caught
        {"a_us": 10.0, "b_us_per_kernel": 1.5, "residuals_us": {"p": 3.5, "q": -1.25}},
        {"a_us": 40.0, "b_us_per_kernel": 0.25, "residuals_us": {"p": -2.75}},
    ]
    cases = [(k, f) for f in made_up for k in (0, 1, 85, 273)]
    fit = res["cost_model"]["fit"]
    cases += [(p["kernels"], dict(fit)) for p in res["cost_model"]["points"]]
    return cases


def cost_mistake(got: float, kernels: int, fit: dict) -> str | None:
    """The mistake a wrong prediction matches, if any."""
    a, b = fit["a_us"], fit["b_us_per_kernel"]
    want = a + b * kernels

    def near(x):
        return math.isclose(got, x, rel_tol=1e-6, abs_tol=1e-9)

    if near(want / 1000):
        return "that is ms: the fit is in µs, and so is the answer"
    if near(b * kernels):
        return "you left out a_us: the intercept is part of every prediction"
    if near(a * kernels + b):
        return "a_us and b_us_per_kernel swapped: a is the intercept, b the µs per kernel"
    if near(a + b):
        return "that ignores the kernel count: b_us_per_kernel is per kernel"
    residuals = list(fit.get("residuals_us", {}).values())
    if residuals and (near(want + sum(residuals)) or near(want + sum(residuals) / len(residuals))):
        return (
            "you added the residuals: each is one recorded point's distance from the line, "
            "not part of a prediction"
        )
    return None


def shown_us(got: float, want: float) -> tuple[str, str]:
    """got and want in µs, with digits enough to tell them apart (3 significant, or more)."""
    for n in range(3, 16):
        g, w = f"{got:.{n}g}", f"{want:.{n}g}"
        if g != w:
            return g, w
    return sig3(got), sig3(want)


def is_recording(res) -> bool:
    """res holds a cost-model fit with its two numbers and its points."""
    try:
        fit = res["cost_model"]["fit"]
        return all(as_number(fit[k]) is not None for k in ("a_us", "b_us_per_kernel")) and all(
            "kernels" in p for p in res["cost_model"]["points"]
        )
    except Exception:
        return False


@checker
def check_predicted_us(fn, res: dict) -> Verdict:
    """fn(kernels, fit) → µs the cost model predicts for a replayed step of `kernels`
    kernels, fit = res["cost_model"]["fit"] ({"a_us", "b_us_per_kernel", ...})."""
    if not is_recording(res):
        return hint(
            f"pass the recording as the second argument, res = load_results() (its "
            f'res["cost_model"]["fit"] is the fit), not {shown_value(res)}'
        )
    for kernels, fit in fit_cases(res):
        shown = (
            f"kernels={kernels}, fit a_us={fit['a_us']}, b_us_per_kernel={fit['b_us_per_kernel']}"
        )
        got = call_in_time(fn, (kernels, dict(fit)), shown)
        if got is FAILED:
            return False
        want = fit["a_us"] + fit["b_us_per_kernel"] * kernels
        value = as_number(got)  # an int, a float, numpy's, a one-element tensor
        if value is None and isinstance(got, Integral) and not isinstance(got, bool):
            return hint(f"on {shown} you returned a number too large for a float; the fit says "
                        f"{sig3(want)} µs")  # fmt: skip
        if value is None:
            return hint(
                f"on {shown}: return a number of µs, not {type(got).__name__} {shown_value(got)}"
            )
        if math.isclose(value, want, rel_tol=1e-6, abs_tol=1e-9):
            continue
        mistake = cost_mistake(value, kernels, fit)
        g, w = shown_us(value, want)
        return hint(
            f"on {shown} you returned {g} µs, the fit says {w} µs"
            + (f": {mistake}" if mistake else ": µs = a_us + b_us_per_kernel × kernels")
        )
    return ok("µs = a_us + b_us_per_kernel × kernels" + fused_prediction(res))


def fused_prediction(res: dict) -> str:
    """'; for <row> (<k> kernels) it predicts X µs, measured Y µs' for the course's fastest
    step, when the recording has it."""
    rows = {r["name"]: r for r in res.get("fusion", {}).get("rows", [])}
    row = rows.get("fused kernels in bucketed graphs")
    if row is None:
        return ""
    fit = res["cost_model"]["fit"]
    predicted = fit["a_us"] + fit["b_us_per_kernel"] * row["kernels"]
    measured = row["step_us"]["median"]
    return (
        f"; for {row['name']!r} ({row['kernels']:.0f} kernels) it predicts {sig3(predicted)} µs, "
        f"measured {sig3(measured)} µs (residual {sig3(measured - predicted)} µs)"
    )
