"""Issue 27, stop 47, call A: the op alone (RoPE, write, attention, combine) of the package
against variants4's short-row path (a row of up to SHORT blocks attended by one program in one
pass, which writes the output; its combine programs skip it), the bench's inputs (a table of
64 blocks, lens = n - 1), interleaved rounds; the kernel alone of each; the variants' output
against the reference and their replay against their eager call."""
import collections, functools, json, statistics, sys
import torch
sys.path.insert(0, ".final")
from tinyllm import kernels
from tinyllm.lab import bench
import variants6 as V

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe66.py OUT.json")}
H, H_kv, D, dev, dt, width = 8, 4, 32, "cuda", torch.bfloat16, 64


def graph_of(fn, calls=20):
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


def per_call(g, calls=20, repeats=30):
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def kernels_per_call(g, calls=20):
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        g.replay(); torch.cuda.synchronize()
    return sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA) / calls


VARIANTS = {
    "package op": lambda *a: kernels.rope_write_attend(*a),
    "package kernel": lambda *a: kernels.rope_write_shares(*a),
    "early fused op": lambda *a: V.op(*a, combine=False),
    "early both op": lambda *a: V.op(*a),
    "early kernel": lambda *a: V.op(*a, shares=True),
}
gen = torch.Generator(device=dev).manual_seed(0)
times, checks = {}, {}
for B in (1, 8, 32):
    for n in (128, 1024):
        qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
        angle = torch.rand(1024, D // 2, device=dev, generator=gen)
        wide = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
        rows = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
        lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
        args = (qkv, angle.cos().to(dt), angle.sin().to(dt), wide, wide.clone(), rows, lens)
        ref = kernels.reference_rope_write_attend(qkv.float(), args[1].float(), args[2].float(), wide.float(), wide.clone().float(), rows, lens)
        key = f"batch {B}, {n} keys"
        checks[key] = {}
        for name, fn in VARIANTS.items():
            if "kernel" in name:
                continue
            eager = fn(*args).float()
            g = torch.cuda.CUDAGraph()
            o = fn(*args)
            with torch.cuda.graph(g):
                o = fn(*args)
            outs = []
            for _ in range(200):
                g.replay(); torch.cuda.synchronize(); outs.append(o.float().clone())
            checks[key][name] = {"max_err_vs_ref": (eager - ref).abs().max().item(),
                                 "equal_package": torch.equal(eager, kernels.rope_write_attend(*args).float()),
                                 "replay_equal_eager": all(torch.equal(x, eager) for x in outs)}
        graphs = {name: graph_of(functools.partial(fn, *args)) for name, fn in VARIANTS.items()}
        got = collections.defaultdict(list)
        for _ in range(5):
            for name, g in graphs.items():
                got[name].append(round(per_call(g), 3))
        times[key] = {name: {"rounds": v, "median": statistics.median(v),
                             "kernels_per_call": kernels_per_call(graphs[name])} for name, v in got.items()}
        print(key, {k: (v["median"], v["kernels_per_call"]) for k, v in times[key].items()}, flush=True)
        print("   check", {k: (round(v["max_err_vs_ref"], 4), v["replay_equal_eager"], v["equal_package"]) for k, v in checks[key].items()}, flush=True)
        res["op_alone_us"], res["checks"] = times, checks
        json.dump(res, open(out_path, "w"), indent=1)
print("done")
