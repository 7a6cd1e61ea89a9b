"""Issue 27, stop 45, call J: (1) the op alone through its custom op (what the bench times,
lab.pages.attention_times) against the launcher called directly (what the probes timed), same
inputs, interleaved, 3 rounds, batch 1 and 8, 128 and 1024 keys, a table as wide as the keys
(the bench's) and one of 64 blocks (the probes'); the kernels each graph replays, counted by
torch's profiler; (2) the barrier of lab.floor against the same barrier whose waits read the
count with a volatile load, not an atomic add, at 1 and 132 programs."""
import collections, functools, json, statistics, sys
import torch
import triton
import triton.language as tl
from tinyllm import kernels
from tinyllm.lab import bench, floor

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe62.py OUT.json")}
H, H_kv, D, dev, dt = 8, 4, 32, "cuda", torch.bfloat16


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
    return round(statistics.median(times), 2)


def kernels_per_call(g, calls=20):
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        g.replay(); torch.cuda.synchronize()
    names = collections.Counter(e.name[:60] for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return sum(names.values()) / calls, dict(names)


gen = torch.Generator(device=dev).manual_seed(0)
op = {}
for B in (1, 8):
    for n in (128, 1024):
        for width in ("keys", 64):
            blocks = -(-n // 16) if width == "keys" else 64
            pool = torch.randn(B * blocks + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            table = (torch.arange(B * blocks, device=dev, dtype=torch.int32) + 1).view(B, blocks)
            lens = torch.full((B,), n, device=dev, dtype=torch.int32)
            qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
            angle = torch.rand(1024, D // 2, device=dev, generator=gen)
            args = (qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens - 1)
            graphs = {"custom op": graph_of(functools.partial(kernels.rope_write_attend, *args)),
                      "launcher": graph_of(functools.partial(kernels.triton_rope_write_attend, *args))}
            got = collections.defaultdict(list)
            for _ in range(3):
                for name, g in graphs.items():
                    got[name].append(per_call(g))
            key = f"batch {B}, {n} keys, table {width}"
            op[key] = {name: {"rounds": v, "median": statistics.median(v),
                              "kernels_per_call": kernels_per_call(graphs[name])[0],
                              "names": kernels_per_call(graphs[name])[1]} for name, v in got.items()}
            print("op", key, {k: (v["median"], v["kernels_per_call"]) for k, v in op[key].items()}, flush=True)
res["op_alone_us"] = op
json.dump(res, open(out_path, "w"), indent=1)


@triton.jit
def barriers_volatile(count_ptr, K: tl.constexpr, SPINS: tl.constexpr):
    programs = tl.num_programs(0)
    for k in range(K):
        tl.atomic_add(count_ptr, 1, sem="release")
        seen = tl.load(count_ptr, volatile=True)
        spins = 0
        while (seen < (k + 1) * programs) & (spins < SPINS):
            seen = tl.load(count_ptr, volatile=True)
            spins += 1
        if spins == SPINS:
            tl.atomic_add(count_ptr + 1, 1)


bar = {}
real = floor.barrier_kernel
for name, kern in (("atomic reads (lab.floor)", None), ("volatile loads", barriers_volatile)):
    floor.barrier_kernel = real if kern is None else (lambda kern=kern: kern)
    bar[name] = floor.barrier_floor(ks=(1, 10, 50, 100), programs=(1, 132, 528))
    print("barriers", name, {k: (v["us_per_barrier"], v["counted"]) for k, v in bar[name].items() if isinstance(v, dict)}, flush=True)
floor.barrier_kernel = real
res["barriers"] = bar
json.dump(res, open(out_path, "w"), indent=1)
print("done")
