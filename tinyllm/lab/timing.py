"""Timing and profiling a decode step on a GPU (notebooks 01, 04 and 07, and bench.py).

step_times and time_steps time steps back to back with CUDA events, as a decode loop runs
them; spread gives a cell's median and min–max over repeats; traced_steps is the one
profiling set-up (torch.profiler), and profile_steps reads kernels and launch calls from it;
pool_bytes reads a graph memory pool's size from the allocator; copy_bandwidth_GBps measures
the bandwidth floor's denominator. All need CUDA.
"""

import json
import statistics
import tempfile
import time
from pathlib import Path

import torch


def step_times(step, tok: torch.Tensor, n_steps: int, warmup: int = 4, per: int = 1) -> list[float]:
    """µs of each of n_steps steps run back to back after warmup steps, a CUDA event between
    consecutive steps: each interval is whichever is slower, the CPU issuing the step or the
    GPU running it. per > 1: an event every `per` steps, each interval's mean step (n_steps
    a multiple of per), so the host records fewer events and a fast step is the GPU's."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps // per + 1)]
    for _ in range(warmup):
        step(tok)
    torch.cuda.synchronize()
    events[0].record()
    for i in range(n_steps):
        step(tok)
        if (i + 1) % per == 0:
            events[(i + 1) // per].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 / per for a, b in zip(events, events[1:])]


def host_times(step, tok: torch.Tensor, n: int) -> list[float]:
    """µs the host takes to issue one step, each with the GPU idle before it."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(tok)
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return out


def spread(values) -> dict:
    """{"median", "min", "max", "n"} of a list of numbers (a cell's repeats), rounded to 0.1."""
    values = list(values)
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1), "n": len(values)}  # fmt: skip


def time_steps(step, tok: torch.Tensor, n_steps: int, warmup: int = 16, n_cpu: int = 64) -> dict:
    """Median step time of n_steps decode steps run back to back, as a decode loop runs
    them: a CUDA event between consecutive steps, so each interval is whichever is slower,
    the CPU issuing the step or the GPU running it. cpu_us: median host time to issue one
    step, measured separately with the GPU idle before each step."""
    gpu = step_times(step, tok, n_steps, warmup)
    cpu = host_times(step, tok, n_cpu)
    return {"step_us": statistics.median(gpu), "cpu_us": statistics.median(cpu)}


def traced_steps(step, tok: torch.Tensor, n_steps: int) -> tuple[list[dict], list[tuple]]:
    """The one profiling set-up of the lab: three steps to warm up, then n_steps steps under
    torch.profiler (CPU and CUDA), each in a record_function marker "decode_step_i" and
    synchronized. Returns the chrome trace's events and each step's (start, end, i) span."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(3):
        step(tok)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(n_steps):
            with record_function(f"decode_step_{i}"):
                step(tok)
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(f"{tmp}/trace.json")
        events = json.loads(Path(f"{tmp}/trace.json").read_text())["traceEvents"]
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].rsplit("_", 1)[1]))
        for e in events
        if e.get("name", "").startswith("decode_step_") and e.get("cat") == "user_annotation"
    )
    return events, spans


def profile_steps(step, tok: torch.Tensor, n_steps: int = 3) -> list[dict]:
    """Kernels and launch calls of n_steps consecutive steps, from traced_steps."""
    events, steps = traced_steps(step, tok, n_steps)
    launch_ts = {}
    out = []
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            if "Launch" in e["name"] or "Memcpy" in e["name"] or "Memset" in e["name"]:
                launch_ts[e["args"]["correlation"]] = e["ts"]
                out.append(
                    {
                        "name": e["name"],
                        "start": e["ts"],
                        "dur": e["dur"],
                        "kind": "cpu",
                        "corr": e["args"]["correlation"],
                    }
                )
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            out.append(
                {
                    "name": e["name"][:60],
                    "start": e["ts"],
                    "dur": e["dur"],
                    "kind": "gpu",
                    "corr": e.get("args", {}).get("correlation"),
                }
            )
    trace = []
    for ev in out:
        t = ev["start"] if ev["kind"] == "cpu" else launch_ts.get(ev["corr"])
        owner = next((s for lo, hi, s in steps if t is not None and lo <= t <= hi), None)
        if owner is not None:
            trace.append(
                {
                    "step": owner,
                    "name": ev["name"],
                    "start_us": ev["start"],
                    "dur_us": ev["dur"],
                    "kind": ev["kind"],
                }
            )
    t0 = min((e["start_us"] for e in trace), default=0)
    for e in trace:
        e["start_us"] = round(e["start_us"] - t0, 3)
        e["dur_us"] = round(e["dur_us"], 3)
    return sorted(trace, key=lambda e: e["start_us"])


def kernel_summary(trace: list[dict]) -> dict:
    steps = sorted({e["step"] for e in trace})
    per_step = [[e for e in trace if e["step"] == s and e["kind"] == "gpu"] for s in steps]
    return {
        "kernels": statistics.median(len(k) for k in per_step),
        "kernel_us": statistics.median(sum(e["dur_us"] for e in k) for k in per_step),
    }


def pool_bytes(pool) -> int:
    """Bytes reserved by one graph memory pool, from the allocator's snapshot."""
    return sum(
        seg["total_size"]
        for seg in torch.cuda.memory_snapshot()
        if tuple(seg.get("segment_pool_id", ())) == tuple(pool)
    )


def copy_bandwidth_GBps() -> float:
    x = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()  # 1 GiB
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        y.copy_(x)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / 10
    return 2 * x.numel() * x.element_size() / seconds / 1e9  # bytes read + written
