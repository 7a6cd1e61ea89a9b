"""tinyllm.course.exercises.nb01: the checkers of notebook 01's exercises accept the right
answer and answer every wrong one (and every wrong type) with one hint, never a traceback and
never a false [OK]."""

import itertools
import re

import numpy as np
import pytest
import torch
from conftest import (
    HostileList,
    assert_hint,
    failed,
    never_returns,
    passed,
    recorded_results,
    returning,
)

from tinyllm.course import exercises as ex
from tinyllm.course.exercises.nb01 import launch_bound_batches, static_extra_ops

EXTRA = {"copy_", "index_select", "index_copy_", "index_fill_", "add_"}


@pytest.fixture(scope="module")
def extra(shipped_model):
    return static_extra_ops(shipped_model)


def test_the_static_steps_extra_ops_are_counted_live(extra):
    assert extra == EXTRA


def test_the_right_set_passes(shipped_model, capsys):
    assert passed(ex.check_static_extra_ops(set(EXTRA), shipped_model))
    out = capsys.readouterr().out
    assert out.startswith("[OK]") and "index_fill_" in out
    assert passed(ex.check_static_extra_ops(["aten::" + op for op in EXTRA], shipped_model))


@pytest.mark.parametrize(
    "answer, hint",
    [
        (EXTRA - {"index_fill_"}, "also runs 'index_fill_'"),
        (EXTRA - {"copy_", "add_"}, "2 missing"),
        (EXTRA | {"mul"}, "'mul' is not run more often"),
        ({"linear", "silu"}, "5 missing in all"),  # the example the text gives
        (EXTRA | {"cat"}, "'cat' is not run more often"),
        (EXTRA | {"slice"}, "'slice' is a view"),  # run more often, but it launches no kernel
        (EXTRA | {"transpose"}, "launches no kernel"),
        ({"add_", "copy_", "index_copy", "index_fill", "index_select"}, "'index_copy' lacks"),
        ({"add", "copy_", "index_copy_", "index_fill_", "index_select"}, "1 of your names lacks"),
        (None, "not answered yet"),
        ("index_copy_", "answer with a set of op names"),
        (5, "answer with a set of op names"),
        ({"index_copy_": 8}, "answer with a set of op names"),
        ([1, 2], "the op names are strings"),
    ],
)
def test_a_wrong_set_gets_a_hint(shipped_model, answer, hint, capsys):
    assert failed(ex.check_static_extra_ops(answer, shipped_model))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out


def test_the_example_answer_tells_no_more_than_an_empty_one(shipped_model, capsys):
    """The text's and the hints' example, {'linear', 'silu'}: no op of the answer, nor one that only
    lacks its trailing _, so its hint is the empty answer's."""
    ex.check_static_extra_ops(None, shipped_model)
    example = set(re.findall(r"'(\w+)'", capsys.readouterr().out))
    assert example == {"linear", "silu"}
    assert not example & EXTRA and not {op + "_" for op in example} & EXTRA
    ex.check_static_extra_ops(example, shipped_model)
    after_example = capsys.readouterr().out
    ex.check_static_extra_ops(set(), shipped_model)
    assert after_example == capsys.readouterr().out


def my_launch_bound(res):
    gpu = dict(zip(res["gpu_kernel_time"]["batch"], res["gpu_kernel_time"]["eager_us"]))
    return {b for b, c in zip(res["cpu_time"]["batch"], res["cpu_time"]["eager_us"]) if c >= gpu[b]}


def test_a_right_launch_bound_function_passes(capsys):
    res = recorded_results()
    assert my_launch_bound(res) == launch_bound_batches(res)
    assert passed(ex.check_launch_bound(my_launch_bound, res))
    assert capsys.readouterr().out.startswith("[OK]")


def strictly_above(res):  # > instead of >=: a tie is launch-bound too
    gpu = dict(zip(res["gpu_kernel_time"]["batch"], res["gpu_kernel_time"]["eager_us"]))
    return {b for b, c in zip(res["cpu_time"]["batch"], res["cpu_time"]["eager_us"]) if c > gpu[b]}


def busy_forever(res):  # a loop that never ends, and swallows what it can
    while True:
        try:
            pass
        except Exception:
            pass


def by_step_time(res):  # compares the step time, which is never below the kernel time
    gpu = dict(zip(res["gpu_kernel_time"]["batch"], res["gpu_kernel_time"]["eager_us"]))
    return {b for b, s in zip(res["step_time"]["batch"], res["step_time"]["eager_us"])
            if s >= gpu[b]}  # fmt: skip


def the_recordings_answer(res):  # the set for the recording, whatever the times say
    return my_launch_bound(recorded_results())


def as_lists(res):  # the times read as lists aligned with "batch": they are dicts of lists
    cpu, gpu = res["cpu_time"], res["gpu_kernel_time"]
    return {b for i, b in enumerate(cpu["batch"]) if cpu[i] >= gpu[i]}


@pytest.mark.parametrize(
    "fn, hint",
    [
        (as_lists, "res['cpu_time']['eager_us'][i]"),
        (by_step_time, "launch-bound"),
        (the_recordings_answer, "launch-bound"),
        (strictly_above, "(>=, not >)"),
        (busy_forever, "did not finish within 5 s"),
        (lambda res: itertools.count(), "iteration did not end within 2 s"),
        (returning(HostileList([1, 2])), "return a set of batch sizes"),
        (lambda res: None, "returned None"),
        (lambda res: 1 / 0, "ZeroDivisionError"),
        (lambda res: "1, 2", "return a set of batch sizes"),
        (lambda res: {"a"}, "return a set of batch sizes"),
        (lambda res: {b + 0.9 for b in my_launch_bound(res)}, "whole numbers"),
        (launch_bound_batches, "the package's own answer"),
        (lambda res: [float("inf")], "whole numbers"),
        (lambda res: "1", "return a set of batch sizes"),
        (lambda res: 3, "return a set of batch sizes"),
        ({1, 2}, "pass your function itself"),
        (None, "pass your function itself"),
    ],
)
def test_a_wrong_launch_bound_function_gets_a_hint(fn, hint, capsys):
    res = recorded_results()
    assert failed(ex.check_launch_bound(fn, res))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out


# --- the bandwidth floor: any real number type, never two equal numbers in a hint -----------


def floor_us(n, b, bw):
    return n * b / (bw * 1e9) * 1e6


@pytest.mark.parametrize(
    "answer",
    [
        lambda *a: np.float32(floor_us(*a)),
        lambda *a: torch.tensor(floor_us(*a)),
        lambda *a: torch.tensor(floor_us(*a), dtype=torch.float16),  # within 0.1 %
        lambda *a: np.float64(floor_us(*a)),
    ],
    ids=["numpy float32", "float32 tensor", "float16 tensor", "numpy float64"],
)
def test_bandwidth_floor_in_any_number_type(answer, capsys):
    assert passed(ex.check_bandwidth_floor(answer))
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize(
    "answer, needle",
    [
        (lambda *a: torch.tensor(floor_us(*a) * 1.002), "returned a torch.float32 tensor 1.643"),
        (lambda *a: floor_us(*a) * (1 + 2e-3), "returned 1.643 µs, expected 1.64"),
        (  # 6.56e6 bytes: past float16's largest number, 65504
            lambda n, b, bw: torch.tensor(n * b, dtype=torch.float16) / (bw * 1e9) * 1e6,
            "not a finite number",
        ),
        (lambda *a: float("inf"), "not a finite number"),
        (lambda *a: float("nan"), "returned nan, not a finite number"),
        (lambda *a: True, "not a number of µs"),
        (lambda n, b, bw: n * b / (bw * 2**30) * 1e6, "not 2^30 bytes"),  # GiB/s
        (lambda n, b, bw: n * b * 8 / (bw * 1e9) * 1e6, "a byte is 8 bits"),  # bits
        (lambda n, b, bw: n / (bw * 1e9) * 1e6, "each weight is bytes_per_param bytes"),
        (never_returns, "did not finish within 2 s"),
    ],
    ids=[
        "float32 off",
        "off by 0.2 %",
        "float16 overflow",
        "inf",
        "nan",
        "bool",
        "GiB",
        "bits",
        "no bytes per param",
        "never returns",
    ],
)
def test_bandwidth_floor_wrong(answer, needle, capsys):
    out = assert_hint(ex.check_bandwidth_floor, answer, capsys, needle)
    assert two_different_numbers(out), out


def two_different_numbers(hint: str) -> bool:
    """A hint that says 'returned X, expected Y' never has X == Y as printed."""
    m = re.search(r"returned (?:a [\w.]+ (?:tensor )?)?([^\s,;]+).*?expected ([^\s,;:]+)", hint)
    return m is None or m.group(1) != m.group(2)


# --- junk, for every checker of notebook 01: a hint, never a traceback --------------------
