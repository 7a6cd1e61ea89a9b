"""The floor of a graph node: what a CUDA graph still pays for each kernel it replays.

A graph of K kernels that each change one number does no work worth timing: its replay time is
what the GPU spends starting, running and retiring K tiny kernels in order. node_floor times
such graphs for several K, three ways (torch's in-place add, a Triton kernel, and the same
Triton kernel launched with programmatic dependent launch, PDL, which lets a kernel start
before the one it follows has finished); fit reads the µs each node adds and the replay's
fixed cost from them.

A persistent kernel has no nodes to pay for, but its programs must still wait for each other
between stages of its work. The bluntest wait is a grid-wide barrier: every program counts itself
in, with an atomic add, then reads the count (atomic adds of zero) until every program has.
barrier_floor times one kernel of K such barriers, for several K and several numbers of
programs, and fits the µs each barrier adds. Needs CUDA.
"""

import functools
import statistics

import torch

from tinyllm.validate import validate_int


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


def best_replay_us(graph, replays: int, repeats: int) -> float:
    """µs per replay of graph: the best of `repeats` timings of `replays` replays back to
    back between CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(repeats):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / replays)
    return best


def replay_us(node, k: int, replays: int = 200, repeats: int = 5) -> tuple[float, bool]:
    """A graph of k calls of node(x) on one float: µs per replay (best_replay_us); and whether
    x counted every node of every replay."""
    x = torch.zeros(1, device="cuda")
    for _ in range(3):  # compile and load before capture
        node(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(k):
            node(x)
    x.zero_()
    best = best_replay_us(graph, replays, repeats)
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


# A wait of barrier_kernel gives up after SPINS reads of the count: far more than a barrier that
# holds needs (on the H200, one read and one add cost about half a µs a barrier, at one program),
# yet a wait that cannot end gives up within a fraction of a second. barrier_floor takes up to
# MOST_PER_SM programs a multiprocessor: every NVIDIA GPU since 2012 holds at least 16 programs,
# CUDA's thread blocks, a multiprocessor at once (the CUDA guide's table of compute
# capabilities), and these are small.
SPINS = 1 << 16
MOST_PER_SM = 4


@functools.cache
def barrier_kernel():
    """The kernel of barrier_floor, defined once, on first use: importing this module needs no
    Triton. Every program of its grid waits at K barriers, one after another, counting at
    count_ptr[0]. SPINS bounds each wait, so a grid whose programs cannot all run at once ends
    and does not hang; a wait that ran out is counted at count_ptr[1]. Triton's interpreter
    runs programs one at a time: there every wait but the last program's runs out."""
    import triton
    import triton.language as tl

    @triton.jit
    def barriers(count_ptr, K: tl.constexpr, SPINS: tl.constexpr):
        programs = tl.num_programs(0)
        for k in range(K):
            tl.atomic_add(count_ptr, 1, sem="release")  # this program is here
            seen = tl.atomic_add(count_ptr, 0, sem="acquire")  # an atomic read of the count
            spins = 0
            while (seen < (k + 1) * programs) & (spins < SPINS):  # until every program is
                seen = tl.atomic_add(count_ptr, 0, sem="acquire")
                spins += 1
            if spins == SPINS:
                tl.atomic_add(count_ptr + 1, 1)  # this wait ran out

    return barriers


def barrier_us(programs: int, k: int, replays: int = 200, repeats: int = 5,
               spins: int = SPINS) -> tuple[float, bool]:  # fmt: skip
    """A graph of one kernel of `programs` programs that wait at k barriers, its count of
    arrivals zeroed first: µs per replay (best_replay_us); and whether every program passed
    every barrier with no wait run out, in every replay (the waits that ran out are counted
    across them all). A first run, before the graph, that ran out is not timed: (nan, False)."""
    kernel = barrier_kernel()
    count = torch.zeros(2, dtype=torch.int32, device="cuda")
    kernel[(programs,)](count, K=k, SPINS=spins, num_warps=1)  # compile, load and try once
    if count[1].item():  # the programs could not all wait at once: do not repeat it
        return float("nan"), False
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        count[0].zero_()
        kernel[(programs,)](count, K=k, SPINS=spins, num_warps=1)
    best = best_replay_us(graph, replays, repeats)
    return round(best, 2), count.tolist() == [k * programs, 0]


def barrier_floor(ks=(1, 10, 50, 100), programs=(1, 132, 528), replays: int = 200) -> dict:
    """For each number of programs: µs per replay at each K, every barrier checked, and the
    line fitted from K = 10 on, its slope the µs per barrier. One program waits for no one: its
    barriers cost the atomics alone. The H200 has 132 multiprocessors. Each number of programs
    is at most MOST_PER_SM a multiprocessor, so that all of them run at once."""
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    for n in programs:
        validate_int("programs", n, hi=MOST_PER_SM * sms)
    for k in ks:
        validate_int("K", k, hi=1000)
    out = {"ks": list(ks), "replays": replays}
    for n in programs:
        timed = [barrier_us(n, k, replays) for k in ks]
        us = [t for t, _ in timed]
        fitted = [(k, t) for k, t in zip(ks, us) if k >= 10]
        line = fit(*zip(*fitted))
        out[f"{n} programs"] = {"us": us, "counted": all(ok for _, ok in timed),
                                "us_per_barrier": line["us_per_node"],
                                "fixed_us": line["fixed_us"]}  # fmt: skip
    return out


def main(argv=None) -> dict:
    """python -m tinyllm.lab.floor OUT.json [--force]: node_floor and barrier_floor, with their
    provenance, into OUT.json (notebook 11's results/h200_floor.json). Needs CUDA."""
    import argparse
    import json
    import sys
    from pathlib import Path

    from tinyllm.checkpoint import validate_outputs, write_whole
    from tinyllm.lab.bench import provenance

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("out", type=Path, help="the JSON file to write")
    p.add_argument("--force", action="store_true", help="allow writing over an existing out")
    args = p.parse_args(argv)
    validate_outputs(p, args.force, {"out": args.out})
    if not torch.cuda.is_available():
        raise SystemExit("tinyllm.lab.floor times graphs on a GPU and this machine has none; "
                         "notebook 11 shows the recording, results/h200_floor.json")  # fmt: skip
    argv = sys.argv[1:] if argv is None else argv
    out = {"provenance": provenance("python -m tinyllm.lab.floor " + " ".join(argv)),
           **node_floor(), "barriers": barrier_floor()}  # fmt: skip
    write_whole(args.out, lambda partial: Path(partial).write_text(json.dumps(out, indent=1)))
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
