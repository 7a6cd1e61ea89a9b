"""tinyllm.course.exercises.nb01: the checkers of notebook 01's exercises accept the right
answer and answer every wrong one (and every wrong type) with one hint, never a traceback and
never a false [OK]."""

import pytest
from conftest import recorded_results

from tinyllm.course import exercises as ex
from tinyllm.course.exercises.nb01 import launch_bound_batches, static_extra_ops

EXTRA = {"copy_", "index_select", "index_copy_", "index_fill_", "add_"}


@pytest.fixture(scope="module")
def extra(shipped_model):
    return static_extra_ops(shipped_model)


def test_the_static_steps_extra_ops_are_counted_live(extra):
    assert extra == EXTRA


def test_the_right_set_passes(shipped_model, capsys):
    assert ex.check_static_extra_ops(set(EXTRA), shipped_model) is True
    out = capsys.readouterr().out
    assert out.startswith("[OK]") and "index_fill_" in out
    assert ex.check_static_extra_ops(["aten::" + op for op in EXTRA], shipped_model) is True


@pytest.mark.parametrize(
    "answer, hint",
    [
        (EXTRA - {"index_fill_"}, "also runs 'index_fill_'"),
        (EXTRA - {"copy_", "add_"}, "2 missing"),
        (EXTRA | {"mul"}, "'mul' is not run more often"),
        (EXTRA | {"cat"}, "'cat' is not run more often"),
        (None, "not answered yet"),
        ("index_copy_", "answer with a set of op names"),
        (5, "answer with a set of op names"),
        ({"index_copy_": 8}, "answer with a set of op names"),
        ([1, 2], "the op names are strings"),
    ],
)
def test_a_wrong_set_gets_a_hint(shipped_model, answer, hint, capsys):
    assert ex.check_static_extra_ops(answer, shipped_model) is False
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out


def my_launch_bound(res):
    gpu = dict(zip(res["gpu_kernel_time"]["batch"], res["gpu_kernel_time"]["eager_us"]))
    return {b for b, c in zip(res["cpu_time"]["batch"], res["cpu_time"]["eager_us"]) if c >= gpu[b]}


def test_a_right_launch_bound_function_passes(capsys):
    res = recorded_results()
    assert my_launch_bound(res) == launch_bound_batches(res)
    assert ex.check_launch_bound(my_launch_bound, res) is True
    assert capsys.readouterr().out.startswith("[OK]")


def by_step_time(res):  # compares the step time, which is never below the kernel time
    gpu = dict(zip(res["gpu_kernel_time"]["batch"], res["gpu_kernel_time"]["eager_us"]))
    return {b for b, s in zip(res["step_time"]["batch"], res["step_time"]["eager_us"])
            if s >= gpu[b]}  # fmt: skip


def the_recordings_answer(res):  # the set for the recording, whatever the times say
    return launch_bound_batches(recorded_results())


@pytest.mark.parametrize(
    "fn, hint",
    [
        (by_step_time, "launch-bound"),
        (the_recordings_answer, "launch-bound"),
        (lambda res: None, "returned None"),
        (lambda res: 1 / 0, "ZeroDivisionError"),
        (lambda res: "1, 2", "return a set of batch sizes"),
        (lambda res: {"a"}, "return a set of batch sizes"),
        (lambda res: {b + 0.9 for b in launch_bound_batches(res)}, "whole numbers"),
        (lambda res: [float("inf")], "whole numbers"),
        (lambda res: "1", "return a set of batch sizes"),
        (lambda res: 3, "return a set of batch sizes"),
        ({1, 2}, "pass your function itself"),
        (None, "pass your function itself"),
    ],
)
def test_a_wrong_launch_bound_function_gets_a_hint(fn, hint, capsys):
    res = recorded_results()
    assert ex.check_launch_bound(fn, res) is False
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out
