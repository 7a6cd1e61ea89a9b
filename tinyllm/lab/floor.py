"""The floor of a graph node: what a CUDA graph still pays for each kernel it replays.

A graph of K kernels that each change one number does no work worth timing: its replay time is
what the GPU spends starting, running and retiring K tiny kernels in order. node_floor times
such graphs for several K, three ways (torch's in-place add, a Triton kernel, and the same
Triton kernel launched with programmatic dependent launch, PDL, which lets a kernel start
before the one it follows has finished); fit reads the µs each node adds and the replay's
fixed cost from them. Needs CUDA.
"""

import statistics

import torch


def fit(ks, us) -> dict:
    """The least-squares line through (K, µs): µs per node (its slope) and the fixed µs of a
    replay (its value at K = 0)."""
    slope, intercept = statistics.linear_regression(ks, us)
    return {"us_per_node": round(slope, 3), "fixed_us": round(intercept, 2)}


def nodes() -> dict:
    """The three ways of launching a node, by name: the Triton kernels are defined on first
    use, so importing this module needs no Triton."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    @triton.jit
    def add_one_pdl(x_ptr):
        tl.extra.cuda.gdc_wait()  # the kernel before this one has finished its writes
        x = tl.load(x_ptr)
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start its set-up
        tl.store(x_ptr, x + 1)

    return {
        "torch add_": lambda x: x.add_(1),
        "triton": lambda x: add_one[(1,)](x),
        "triton, PDL": lambda x: add_one_pdl[(1,)](x, launch_pdl=True),
    }


def replay_us(node, k: int, replays: int = 200, repeats: int = 5) -> tuple[float, bool]:
    """A graph of k calls of node(x) on one float: µs per replay, the best of `repeats`
    timings of `replays` replays back to back between CUDA events; and whether x counted
    every node of every replay."""
    x = torch.zeros(1, device="cuda")
    for _ in range(3):  # compile and load before capture
        node(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(k):
            node(x)
    x.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(repeats):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / replays)
    return round(best, 2), float(x.item()) == k * replays * repeats


def node_floor(ks=(1, 10, 50, 100, 200), replays: int = 200) -> dict:
    """For each way of launching a node: µs per replay at each K, every count checked, and
    the line fitted from K = 10 on (one node is mostly the replay's own cost)."""
    out = {"ks": list(ks), "replays": replays}
    for name, node in nodes().items():
        timed = [replay_us(node, k, replays) for k in ks]
        us = [t for t, _ in timed]
        fitted = [(k, t) for k, t in zip(ks, us) if k >= 10]
        out[name] = {"us": us, "counted": all(ok for _, ok in timed),
                     **fit(*zip(*fitted))}  # fmt: skip
    return out


if __name__ == "__main__":  # python -m tinyllm.lab.floor results/h200_floor.json
    import json
    import sys

    from tinyllm.lab.bench import provenance

    out = {"provenance": provenance(f"python -m tinyllm.lab.floor {sys.argv[1]}"), **node_floor()}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
