"""Issue 27: does a torch.profiler session slow the graphs timed after it, in one process?
In gpu_checks/2026-12-05_bb0064f every time read after the probe's first profiled count of
kernels (probe73.py, section 3b) was longer than before it: the one-number PDL kernels' node
0.75-0.78 µs before, 1.2-1.5 after. Here, in one process: a graph of 40 such kernels (node),
the package's op at 1 and 8 rows and 128 and 1024 keys (a graph of 20 calls each),
timed in 5 rounds (median of 30 replays each), each two ways: the first event recorded before
the replay's launch (probe73's way), or after a replay launched first, so the launch of the
timed one hides behind it; then one profiler session around one replay of
the op's graph; then the same 5 rounds; then a second session, and 5 rounds more; then 20 s
idle and 5 rounds more. Every graph is captured before the first round. Each round also times the
paged fused step at 1 and 8 rows (compile=True, pages.replayed as the bench builds it), with an
event after every step (peers.measure's way) and every 16 (the sweep's): in bb0064f the first
read longer at 1, 2 and 4 rows than in other runs, the second did not."""

import json
import statistics
import sys
import time

import torch

sys.path.insert(0, ".final")
from tinyllm import kernels as K, load_pretrained  # noqa: E402
from tinyllm.lab import bench, floor, pages  # noqa: E402
from tinyllm.lab.prompts import prompt_batch  # noqa: E402
from tinyllm.lab.timing import step_times  # noqa: E402

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe74.py " + " ".join(sys.argv[1:]))}
H, H_kv, D, dev, dt, width, bs = 8, 4, 32, "cuda", torch.bfloat16, 64, 16
gen = torch.Generator(device=dev).manual_seed(0)


def inputs(B, n_old):
    qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
    angle = torch.rand(1024, D // 2, device=dev, generator=gen)
    pool = torch.randn(B * width + 1, H_kv, bs, D, device=dev, dtype=dt, generator=gen)
    table = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
    lens = torch.as_tensor(n_old, device=dev, dtype=torch.int32).expand(B).contiguous()
    return qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens


def graph_of(fn, calls):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g


def per_call(g, calls, repeats=30, hidden=False):
    """µs a call: a replay between two events, the median of `repeats`. The first event is
    recorded before the replay's launch, so the window holds the launch's latency (probe73's
    way); hidden=True: a replay first, then the events around a second replay, launched while
    the first runs, so the window holds the GPU's work alone."""
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hidden:
            g.replay()
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return round(statistics.median(times), 3)


node = floor.nodes()["triton, PDL"]
x = torch.zeros(1, device=dev)
graphs = {"node": (graph_of(lambda: node(x), 40), 40)}
kept = []  # a graph reads its inputs where they were at capture: keep them alive
for B in (1, 8):
    for n in (128, 1024):
        args = inputs(B, n - 1)
        kept.append(args)
        graphs[f"op, batch {B}, {n} keys"] = (
            graph_of(lambda a=args: K.triton_rope_write_attend(*a), 20), 20)
torch.cuda.synchronize()
model = load_pretrained("cuda")  # the paged fused step at 1 and 8 rows, as the bench builds it
steps = {f"step, batch {B}": pages.replayed(model, prompt_batch(B, 32, "cuda"), f"batch {B}",
                                            kv="paged", compile=True) for B in (1, 8)}


def step_us(v, per):
    """The median step, 48 steps back to back, an event every `per` steps (per=1: the
    bench's replayed-alone way, peers.measure; per=16: the sweep's)."""
    v.reset()
    return round(statistics.median(step_times(v.step, v.tok, 48, warmup=4, per=per)), 2)


def rounds(label):
    got = {f"{name}{way}": [] for name in graphs for way in ("", ", launch hidden")}
    for _ in range(5):
        for name, (g, calls) in graphs.items():
            got[name].append(per_call(g, calls))
            got[f"{name}, launch hidden"].append(per_call(g, calls, hidden=True))
        for name, v in steps.items():
            for per in (1, 16):
                got.setdefault(f"{name}, an event every {per}", []).append(step_us(v, per))
    res[label] = {name: {"rounds": v, "median": statistics.median(v)} for name, v in got.items()}
    print(label, {n: v["median"] for n, v in res[label].items()}, flush=True)
    json.dump(res, open(out_path, "w"), indent=1)


def profiled():
    g, _ = graphs["op, batch 1, 128 keys"]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        g.replay()
        torch.cuda.synchronize()
    return sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)


rounds("before any profiler")
res["kernels seen, session 1"] = profiled()
rounds("after one profiler session")
res["kernels seen, session 2"] = profiled()
rounds("after two sessions")
time.sleep(20)
rounds("after two sessions and 20 s idle")
print("kernels seen", res["kernels seen, session 1"], res["kernels seen, session 2"], flush=True)
