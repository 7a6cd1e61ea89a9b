"""Checkers of notebook 01 · launch-bound decode."""

import math

from tinyllm.course.exercises.harness import check_cases, hint, ok
from tinyllm.course.viz import sig3
from tinyllm.lab.results import load_results


def _close_in_us(got, want) -> str | None:
    if not isinstance(got, (int, float)) or math.isnan(got):
        return f"returned {got!r}, not a number of µs"
    if math.isclose(got, want, rel_tol=1e-3):
        return None
    off = math.log10(abs(got / want)) if got else 0
    units = (
        f" (off by 10^{round(off)}: GB/s is 1e9 bytes/s, and 1 s is 1e6 µs)"
        if got and abs(off - round(off)) < 0.01 and round(off)
        else ""
    )
    return f"returned {got:.4g} µs, expected {want:.4g} µs{units}"


def check_bandwidth_floor(fn) -> bool:
    """fn(n_params, bytes_per_param, bandwidth_GBps) → µs to read every weight once."""
    cases = [
        ((3_280_128, 2, 4000.0), "the tiny model in bf16 at 4000 GB/s"),
        ((7_000_000_000, 2, 3350.0), "a 7B model in bf16 at 3350 GB/s"),
        ((1_000_000, 4, 100.0), "1M fp32 weights at 100 GB/s"),
    ]
    return check_cases(
        fn,
        [(a, f"{s} {a}") for a, s in cases],
        lambda n, b, bw: n * b / (bw * 1e9) * 1e6,
        "the floor is the weight bytes over the bandwidth",
        _close_in_us,
    )


def check_kernels_per_step(answer, measured: int) -> bool:
    """answer: predicted kernels one decode step launches; right within ±25 % of measured."""
    if not isinstance(answer, (int, float)):
        return hint(f"answer with a number of kernels, got {answer!r}")
    if abs(answer - measured) <= 0.25 * measured:
        return ok(f"{answer} is close to the {measured} kernels measured")
    side = "low" if answer < measured else "high"
    return hint(
        f"{answer} is too {side} ({measured} measured): count one layer's kernels in "
        f"the table (norms, projections, RoPE, attention, SwiGLU, residual adds), "
        f"multiply by n_layers, then add the embedding, final norm and LM head"
    )


def check_launch_bound(answer, res: dict | None = None) -> bool | None:
    """answer: the recorded batch sizes at which eager decode is launch-bound, i.e. the CPU
    needs at least as long to issue a step as the GPU needs to run its kernels."""
    res = res or load_results()
    if res is None:
        print("No recorded results found in results/: run python -m tinyllm.lab.bench on a GPU.")
        return None
    cpu, gpu = res["cpu_time"], res["gpu_kernel_time"]
    times = {
        b: (c, gpu["eager_us"][gpu["batch"].index(b)])
        for b, c in zip(cpu["batch"], cpu["eager_us"])
        if b in gpu["batch"]
    }
    want = {b for b, (c, g) in times.items() if c >= g}
    try:
        got = {int(b) for b in answer}
    except (TypeError, ValueError):
        return hint(f"answer with the batch sizes, e.g. {{1, 2}}, got {answer!r}")
    if got - times.keys():
        return hint(f"batch {min(got - times.keys())} was not recorded; recorded: {sorted(times)}")
    if got != want:
        b = min(got ^ want)
        c, g = times[b]
        return hint(
            f"batch {b} {'is' if b in want else 'is not'} launch-bound: the CPU "
            f"issues the step in {sig3(c)} µs, the GPU runs it in {sig3(g)} µs"
        )
    return ok(f"eager decode is launch-bound at batch {sorted(want)}")
