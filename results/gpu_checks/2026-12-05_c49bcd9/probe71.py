"""Issue 27, stop 50, call A, part 1: the op alone (RoPE, write, attention, combine) of the
package now (its fused kernel chooses sums or tensor cores a row at a time, on the device)
against the package before (0abd23e, the choice made at launch for every row); at 1 to 8 rows
also now with 16 or 32 shares. The bench's inputs (a table of 64 blocks,
lens = n - 1), a graph of 20 calls, median of 30 replays, 5 rounds interleaved; the kernel
alone of each; every op's output against the reference, the package's, and its replays (100,
new inputs each) against its eager call."""
import collections, functools, json, statistics, sys, time
import torch
sys.path.insert(0, ".final")
from tinyllm import kernels
from tinyllm.lab import bench
import before as BEFORE

out_path = sys.argv[1]
B0 = BEFORE.load_before()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe71.py OUT.json")}
H, H_kv, D, dev, dt, width = 8, 4, 32, "cuda", torch.bfloat16, 64
t0 = time.time()


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


def variants(B):
    v = {"before op": lambda *a: B0.triton_rope_write_attend(*a),
         "before kernel": lambda *a: B0.triton_rope_write_attend(*a, shares=True),
         "now op": lambda *a: kernels.rope_write_attend(*a),
         "now kernel": lambda *a: kernels.rope_write_shares(*a)}
    for S in (16, 32):
        if B <= 8 and S != kernels.split_count(B, H_kv, dev):
            v[f"now op, {S} shares"] = functools.partial(kernels.triton_rope_write_attend, n_splits=S)
    return v


gen = torch.Generator(device=dev).manual_seed(0)
times, checks = {}, {}
for B in (1, 2, 4, 8, 32, 256):
    for n in (40, 128, 1024):
        qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
        angle = torch.rand(1024, D // 2, device=dev, generator=gen)
        wide = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
        rows = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
        lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
        args = (qkv, angle.cos().to(dt), angle.sin().to(dt), wide, wide.clone(), rows, lens)
        ref = kernels.reference_rope_write_attend(qkv.float(), args[1].float(), args[2].float(), wide.float(), wide.clone().float(), rows, lens)
        key = f"batch {B}, {n} keys"
        checks[key] = {}
        VARIANTS = variants(B)
        package = B0.triton_rope_write_attend(*args).float()
        for name, fn in VARIANTS.items():
            if "kernel" in name:
                continue
            eager = fn(*args).float()
            g = torch.cuda.CUDAGraph()
            o = fn(*args)
            with torch.cuda.graph(g):
                o = fn(*args)
            differ = 0
            for r in range(100):
                qkv.copy_(torch.randn(qkv.shape, device=dev, dtype=dt, generator=gen))
                lens.fill_(int(torch.randint(0, n, (1,), generator=gen, device=dev)))
                g.replay()
                differ += not torch.equal(o.float(), fn(*args).float())
            qkv.copy_(args[0]); lens.fill_(n - 1)
            checks[key][name] = {"max_err_vs_ref": (eager - ref).abs().max().item(),
                                 "max_diff_vs_before": (eager - package).abs().max().item(),
                                 "replays_unequal_eager_of_100": differ}
        graphs = {name: graph_of(functools.partial(fn, *args)) for name, fn in VARIANTS.items()}
        got = collections.defaultdict(list)
        for _ in range(5):
            for name, g in graphs.items():
                got[name].append(round(per_call(g), 3))
        times[key] = {name: {"rounds": v, "median": statistics.median(v),
                             "kernels_per_call": kernels_per_call(graphs[name])} for name, v in got.items()}
        print(key, {k: (v["median"], v["kernels_per_call"]) for k, v in times[key].items()}, flush=True)
        print("   check", {k: (round(v["max_err_vs_ref"], 4), round(v["max_diff_vs_before"], 4), v["replays_unequal_eager_of_100"]) for k, v in checks[key].items()}, flush=True)
        res["op_alone_us"], res["checks"] = times, checks
        json.dump(res, open(out_path, "w"), indent=1)
res["seconds"] = round(time.time() - t0, 1)
json.dump(res, open(out_path, "w"), indent=1)
print("done in", res["seconds"], "s")
