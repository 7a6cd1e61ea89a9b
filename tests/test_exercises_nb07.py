"""tinyllm.course.exercises.nb07: the checkers of notebook 07's exercises.

A checker must accept the right answer, reject every wrong one with one hint (never a
traceback, never "[OK]"), and name the mistake a learner makes most. The rule exercise 2
teaches is also checked against what Dynamo really does, on the toy model.
"""

import pytest
import torch
from conftest import failed, passed, peer_results

from tinyllm import GraphDecoder
from tinyllm.course.exercises import (
    check_compile_count,
    check_compile_prediction,
    check_predicted_us,
)
from tinyllm.course.exercises.nb07 import COMPILE_CASES, predicted_graphs, windows_visited
from tinyllm.course.viz import sig3
from tinyllm.graphs import bucket_for


def one_hint(capsys) -> str:
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and out.count("\n") == 1 and "[OK]" not in out, out
    assert "Traceback" not in out
    return out


def raises(*args):
    raise RuntimeError("boom")


def returns_none(*args):
    return None


def stub(*args):
    raise NotImplementedError


NOT_FUNCTIONS = [None, "my_fn", {"a": 1}, [1, 2]]


# --- exercise 1: compile count ------------------------------------------------------------------


def my_compile_count(start, steps, buckets):
    return len({bucket_for(p + 1, buckets) for p in range(start, start + steps)})


def test_compile_count_cases_by_hand():
    assert windows_visited(10, 100, (32, 64, 128, 256)) == {32, 64, 128}  # positions 10..109
    assert windows_visited(31, 2, (32, 64, 128)) == {32, 64}  # 32 keys, then 33
    assert windows_visited(500, 20, (128, 256, 512, 1024)) == {512, 1024}
    assert [my_compile_count(*c) for c in COMPILE_CASES] == [3, 2, 1, 1, 2, 4, 2, 1]


def test_compile_count_right(capsys):
    assert passed(check_compile_count(my_compile_count))
    assert capsys.readouterr().out == "[OK] one compiled graph per window the decode visits\n"


def test_compile_count_accepts_any_integer_type(capsys):
    import numpy as np

    assert passed(check_compile_count(lambda *c: np.int64(my_compile_count(*c))))
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda start, steps, buckets: steps, "one graph per step"),
        (lambda start, steps, buckets: len(buckets), "one graph per bucket"),
        (
            lambda start, steps, buckets: len(
                {bucket_for(p, buckets) for p in range(start, start + steps)}
            ),
            "attends over p + 1 keys",
        ),
        (
            lambda start, steps, buckets: my_compile_count(start, steps + 1, buckets),
            "end at position",
        ),
        (lambda *c: my_compile_count(*c) - 1 if my_compile_count(*c) > 1 else 1, "not the changes"),
        (lambda s, n, b: len({bucket_for(s + 1, b), bucket_for(s + n, b)}), "any between them"),
        (lambda *c: 7, "which windows do the positions"),
        (lambda *c: float(my_compile_count(*c)), "return an int"),
        (lambda *c: my_compile_count(*c) == 1, "return an int"),  # True == 1: still a bool
        (lambda *c: str(my_compile_count(*c)), "return an int"),
        (lambda *c: {my_compile_count(*c)}, "return an int"),
        (raises, "raised RuntimeError: boom"),
        (returns_none, "returned None"),
        (stub, "not solved yet"),
    ],
)
def test_compile_count_wrong(wrong, says, capsys):
    assert failed(check_compile_count(wrong))
    assert says in one_hint(capsys)


@pytest.mark.parametrize("answer", NOT_FUNCTIONS)
def test_compile_count_needs_a_function(answer, capsys):
    assert failed(check_compile_count(answer))
    assert "pass your function itself" in one_hint(capsys)


# --- exercise 2: predict, then run --------------------------------------------------------------

LENS, BUCKETS = [100, 200, 60, 400, 150], (128, 256, 512, 1024)  # windows 128 256 128 512 256


def counted(false=3, none=2):
    """A stand-in for the notebook's run(dynamic): what the counting backend counted."""
    calls = []

    def run(dynamic):
        calls.append(dynamic)
        return false if dynamic is False else none

    run.calls = calls
    return run


def test_the_rule_by_hand():
    windows = [bucket_for(n + 1, BUCKETS) for n in LENS]
    assert windows == [128, 256, 128, 512, 256]
    assert predicted_graphs(windows) == (3, 2)
    assert predicted_graphs([128, 128]) == (1, 1)
    assert predicted_graphs([128, 256]) == (2, 2)


@pytest.mark.parametrize("prediction", [(3, 2), [3, 2]])
def test_prediction_right(prediction, capsys):
    run = counted()
    assert passed(check_compile_prediction(prediction, run, LENS, BUCKETS))
    out = capsys.readouterr().out
    assert (
        out.startswith("[OK] windows [128, 256, 128, 512, 256]: 3 graphs") and out.count("\n") == 1
    )
    assert run.calls == [False, None]


def test_prediction_is_judged_against_what_ran(capsys):
    """The rule is for the hints; the count is what the run measured."""
    assert passed(check_compile_prediction((4, 2), counted(false=4), LENS, BUCKETS))
    assert capsys.readouterr().out.startswith("[OK]")
    assert failed(check_compile_prediction((3, 2), counted(false=4), LENS, BUCKETS))
    one_hint(capsys)


@pytest.mark.parametrize(
    "prediction, says",
    [
        ((5, 5), "one graph per request"),
        ((5, 2), "one graph per request"),
        ((4, 2), "one graph per bucket"),
        ((1, 1), "Count the distinct windows"),
        ((3, 3), "makes the window symbolic"),
        ((3, 1), "first graph is specialized"),
        ((2, 3), "wrong order"),
        ((3, 4), "the first other window once more"),
    ],
)
def test_prediction_wrong(prediction, says, capsys):
    assert failed(check_compile_prediction(prediction, counted(), LENS, BUCKETS))
    assert says in one_hint(capsys)


@pytest.mark.parametrize(
    "prediction", ["3, 2", "(3, 2)", {"False": 3, "None": 2}, (3,), (3, 2, 1), (3.0, 2.0),
                   (True, 2), 3, [None, None]],
)  # fmt: skip
def test_prediction_wrong_type(prediction, capsys):
    run = counted()
    assert failed(check_compile_prediction(prediction, run, LENS, BUCKETS))
    assert "pair of ints" in one_hint(capsys)
    assert run.calls == []  # nothing compiles before a prediction


def test_no_prediction_runs_nothing(capsys):
    run = counted()
    assert failed(check_compile_prediction(None, run, LENS, BUCKETS))
    assert "not answered yet" in one_hint(capsys)
    assert run.calls == []


@pytest.mark.parametrize(
    "run, says",
    [
        (raises, "raised RuntimeError: boom"),
        (returns_none, "returned None"),
        (lambda dynamic: "3", "must return the number of graphs"),
        (lambda dynamic: 3.0, "must return the number of graphs"),
        (None, "pass your function itself"),
    ],
)
def test_prediction_with_a_broken_run(run, says, capsys):
    assert failed(check_compile_prediction((3, 2), run, LENS, BUCKETS))
    assert says in one_hint(capsys)


def test_the_rule_is_what_dynamo_does(toy_model):
    """The lesson's claim, on torch as installed: one graph per distinct window with
    dynamic=False; with dynamic=None, the first window, then one symbolic graph."""
    buckets, lens = (32, 64, 128, 256), [20, 40, 10, 100]  # windows 32, 64, 32, 128
    windows = [bucket_for(n + 1, buckets) for n in lens]
    measured = []
    for dynamic in (False, None):
        compiled = []

        def counting_backend(gm, example_inputs, compiled=compiled):
            compiled.append(gm)
            return gm.forward

        torch._dynamo.reset()
        options = {"backend": counting_backend, "dynamic": dynamic}
        dec = GraphDecoder(
            toy_model, 1, max_len=256, buckets=buckets, use_graph=False, compile=options
        )
        for n in lens:
            dec.prefill(torch.randint(0, 256, (1, n)))
            dec.step(torch.zeros(1, 1, dtype=torch.long))
        measured.append(len(compiled))
    torch._dynamo.reset()
    assert tuple(measured) == predicted_graphs(windows) == (3, 2)


# --- exercise 3: the cost model -----------------------------------------------------------------


def my_predicted_us(kernels, fit):
    return fit["a_us"] + fit["b_us_per_kernel"] * kernels


@pytest.fixture
def res():
    return peer_results()


def test_predicted_us_right(res, capsys):
    assert passed(check_predicted_us(my_predicted_us, res))
    out = capsys.readouterr().out
    assert out.startswith("[OK] µs = a_us + b_us_per_kernel × kernels") and out.count("\n") == 1
    fit = res["cost_model"]["fit"]
    predicted = fit["a_us"] + fit["b_us_per_kernel"] * 53
    assert f"(53 kernels) it predicts {sig3(predicted)} µs" in out
    assert "measured 120 µs" in out


def test_predicted_us_without_the_fused_row(res, capsys):
    res["fusion"]["rows"] = [r for r in res["fusion"]["rows"] if "bucketed" not in r["name"]]
    assert passed(check_predicted_us(my_predicted_us, res))
    assert capsys.readouterr().out == "[OK] µs = a_us + b_us_per_kernel × kernels\n"


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda k, fit: fit["b_us_per_kernel"] * k, "you left out a_us"),
        (lambda k, fit: fit["a_us"] * k + fit["b_us_per_kernel"], "swapped"),
        (lambda k, fit: my_predicted_us(k, fit) / 1000, "that is ms"),
        (lambda k, fit: fit["a_us"] + fit["b_us_per_kernel"], "ignores the kernel count"),
        (lambda k, fit: my_predicted_us(k, fit) + 1, "µs = a_us + b_us_per_kernel × kernels"),
        (lambda k, fit: fit["a"] + fit["b"] * k, "raised KeyError"),
        (lambda k, fit: str(my_predicted_us(k, fit)), "return a number of µs"),
        (lambda k, fit: {"us": my_predicted_us(k, fit)}, "return a number of µs"),
        (lambda k, fit: [my_predicted_us(k, fit)], "return a number of µs"),
        (lambda k, fit: True, "return a number of µs"),
        (raises, "raised RuntimeError: boom"),
        (returns_none, "returned None"),
        (stub, "not solved yet"),
    ],
)
def test_predicted_us_wrong(wrong, says, res, capsys):
    assert failed(check_predicted_us(wrong, res))
    assert says in one_hint(capsys)


@pytest.mark.parametrize("answer", NOT_FUNCTIONS)
def test_predicted_us_needs_a_function(answer, res, capsys):
    assert failed(check_predicted_us(answer, res))
    assert "pass your function itself" in one_hint(capsys)


def test_predicted_us_cannot_change_the_fit(res, capsys):
    def greedy(kernels, fit):
        out = my_predicted_us(kernels, fit)
        fit["a_us"] = 0.0  # a learner's function that writes into what it was given
        return out

    assert passed(check_predicted_us(greedy, res))
    assert res["cost_model"]["fit"]["a_us"] != 0.0
    capsys.readouterr()


@pytest.mark.parametrize(
    "wrong",
    [
        lambda k, fit: my_predicted_us(k, fit) + sum(fit["residuals_us"].values()),
        lambda k, fit: (
            my_predicted_us(k, fit)
            + sum(fit["residuals_us"].values()) / max(1, len(fit["residuals_us"]))
        ),
    ],
    ids=["sum", "mean"],
)
def test_predicted_us_adding_the_residuals_is_wrong(wrong, res, capsys):
    """The recorded fit's residuals add up to about 0 (a least-squares line): the made-up
    fits' do not, so adding them is caught, and named."""
    assert failed(check_predicted_us(wrong, res))
    assert "you added the residuals" in one_hint(capsys)


def test_predicted_us_rounded_shows_two_different_numbers(res, capsys):
    """round(x, 1) can print as the fit's own value at 3 significant figures: the hint shows
    digits enough to tell them apart."""
    fit = res["cost_model"]["fit"]
    assert failed(check_predicted_us(lambda k, f: round(my_predicted_us(k, f), 1), res))
    out = one_hint(capsys)
    got, want = out.split("you returned ")[1].split(" µs, the fit says ")
    assert got != want.split(" µs")[0], out
    assert fit  # the recording's fit is untouched


@pytest.mark.parametrize("recording", [None, {}, {"cost_model": {}}, "res", 3])
def test_predicted_us_needs_the_recording(recording, capsys):
    assert failed(check_predicted_us(my_predicted_us, recording))
    assert "pass the recording as the second argument" in one_hint(capsys)


def test_predicted_us_accepts_a_0_dim_tensor(res, capsys):
    assert passed(
        check_predicted_us(
            lambda k, fit: torch.tensor(my_predicted_us(k, fit), dtype=torch.float64), res
        )
    )
    capsys.readouterr()


def test_compile_count_accepts_a_0_dim_tensor(capsys):
    assert passed(check_compile_count(lambda *a: torch.tensor(my_compile_count(*a))))
    capsys.readouterr()


# --- what no checker may do: hang, or let a learner's number raise ------------------------------


def sleeps(*args):
    import time

    time.sleep(3)
    return 1


@pytest.mark.parametrize(
    "check",
    [
        lambda fn: check_compile_count(fn),
        lambda fn: check_predicted_us(fn, peer_results()),
    ],
    ids=["compile_count", "predicted_us"],
)
def test_a_function_that_never_returns_gets_a_hint(check, monkeypatch, capsys):
    import time

    from tinyllm.course.exercises import nb07

    monkeypatch.setattr(nb07, "TIME_LIMIT_S", 0.5, raising=False)
    start = time.perf_counter()
    assert failed(check(sleeps))
    assert time.perf_counter() - start < 2.5
    assert "did not finish within 0.5 s" in one_hint(capsys)


@pytest.mark.parametrize("huge", [10**400, -(10**400)], ids=["1e400", "-1e400"])
def test_predicted_us_too_large_for_a_float(huge, res, capsys):
    assert failed(check_predicted_us(lambda k, fit: huge, res))
    out = one_hint(capsys)
    assert "too large" in out and len(out) < 300
