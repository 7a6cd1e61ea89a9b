"""exercises: every checker accepts a correct answer, and turns a stub or a wrong answer
into a printed hint and False, never an exception. The checkers of notebooks 01 and 04
here; those of 00, 02, 03, 05 and 06 in test_exercises_nb0N.py."""

import pytest
import torch
from conftest import recorded_results

from tinyllm.course import exercises as ex


def stub(*args):
    raise NotImplementedError


# --- correct answers, written as a learner would ------------------------------------------


def bandwidth_floor(n_params, bytes_per_param, bandwidth_GBps):
    return n_params * bytes_per_param / (bandwidth_GBps * 1e9) * 1e6


def launch_bound_batches(res):
    cpu, gpu = res["cpu_time"]["eager_us"], res["gpu_kernel_time"]["eager_us"]
    return {b for b, c, g in zip(res["cpu_time"]["batch"], cpu, gpu) if c >= g}


RES = recorded_results()
RES["gpu_kernel_time"]["eager_us"][-1] = 10_000  # batch 64 is no longer launch-bound

CHECKS = {  # name: (check, correct answer, wrong answer)
    "bandwidth": (
        ex.check_bandwidth_floor,
        bandwidth_floor,
        lambda n, b, bw: n * b / bw,
    ),  # forgot the units
    "kernels": (lambda a: ex.check_kernels_per_step(a, 180), 170, 40),
    "launch_bound": (
        lambda a: ex.check_launch_bound(a, RES),
        launch_bound_batches(RES),
        set(RES["step_time"]["batch"]),
    ),
    "stale_reads": (ex.check_stale_reads, "abe", {"a"}),
    "pool_choice": (ex.check_pool_choice, "b", "c"),
}
FUNCTION_CHECKS = [name for name, (_, good, _) in CHECKS.items() if callable(good)]


@pytest.mark.parametrize("name", CHECKS)
def test_correct_answer_passes(name, capsys):
    check, good, _ = CHECKS[name]
    assert check(good) is True
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize("name", CHECKS)
def test_wrong_answer_gets_a_hint(name, capsys):
    check, _, bad = CHECKS[name]
    assert check(bad) is False
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and "Traceback" not in out


@pytest.mark.parametrize("name", FUNCTION_CHECKS)
def test_stub_gets_a_hint(name, capsys):
    assert CHECKS[name][0](stub) is False
    assert "not solved yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["bandwidth"])
def test_a_crash_or_a_missing_return_is_a_hint(name, capsys):
    check = CHECKS[name][0]
    assert check(lambda *a: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert check(lambda *a: None) is False
    assert "returned None" in capsys.readouterr().out


def test_unit_slip_is_named(capsys):
    ex.check_bandwidth_floor(lambda n, b, bw: bandwidth_floor(n, b, bw) * 1e3)
    assert "off by 10^3" in capsys.readouterr().out


def test_capture_replay_needs_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("runs the real bonus on a GPU")
    assert ex.check_capture_replay(stub) is None
    assert "needs CUDA" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_capture_replay_on_a_gpu():
    def capture(f, example):
        static_x = example.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            f(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = f(static_x)

        def run(x):
            static_x.copy_(x)
            graph.replay()
            return static_out

        return run

    assert ex.check_capture_replay(capture) is True
    assert ex.check_capture_replay(lambda f, example: f) is False  # calls f, no graph
