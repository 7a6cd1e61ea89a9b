"""Issue 27, stop 48, call A: the op alone (RoPE, write, attention, combine) of the package
against variants7's clustered kernel (a row's shares meet at a thread-block cluster's barrier
and the cluster's last program combines: one kernel), the bench's inputs (a table of 64 blocks,
lens = n - 1), interleaved rounds; the package's kernel alone; each variant's output against
the reference and the package, its replay against its eager call with new inputs each replay,
and the same kernel without the barrier as a control."""
import collections, functools, json, statistics, sys, time
import torch
import triton
import triton.language as tl
sys.path.insert(0, ".final")
from tinyllm import kernels
from tinyllm.lab import bench
import variants7 as V

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe68.py OUT.json")}
H, H_kv, D, dev, dt, width = 8, 4, 32, "cuda", torch.bfloat16, 64
t0 = time.time()


@triton.jit
def rank_kernel(OUT):
    pid = tl.program_id(0)
    n = tl.inline_asm_elementwise("mov.u32 $0, %cluster_nctarank;", "=r,r", [pid],
                                  dtype=tl.int32, is_pure=True, pack=1)
    r = tl.inline_asm_elementwise("mov.u32 $0, %cluster_ctarank;", "=r,r", [pid],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(OUT + 2 * pid, n)
    tl.store(OUT + 2 * pid + 1, r)


shape = {}
for c in (1, 8, 16):
    o = torch.full((2 * 4 * c,), -1, dtype=torch.int32, device=dev)
    try:
        k = rank_kernel.warmup(o, grid=(4,))
        k._init_handles()
        k.packed_metadata = (k.metadata.num_warps, c, k.metadata.shared)
        rank_kernel[(4,)](o)
        torch.cuda.synchronize()
    except Exception as e:
        shape[c] = {"error": repr(e)[:300]}
        continue
    o = o.view(-1, 2).cpu()
    shape[c] = {"ctas": o.shape[0], "nctarank": sorted(set(o[:, 0].tolist())),
                "ranks_ok": o[:, 1].tolist() == [i % c for i in range(o.shape[0])]}
res["cluster_shape"] = shape
print("cluster shape", shape, flush=True)
ok16 = "error" not in shape[16] and shape[16]["nctarank"] == [16]


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


FORMS = {  # name: n_splits, dot, chunk, stages, warps (None: the package's rules)
    "cluster 16": (16, None, None, None, 2),
    "cluster 16, sums": (16, False, 1, 1, 2),
    "cluster 16, dot 1, 1 warp, 2 stages": (16, True, 1, 2, 1),
    "cluster 16, dot 2, 2 warps, 3 stages": (16, True, 2, 3, 2),
    "cluster 8": (8, None, None, None, 2),
    "cluster 8, sums": (8, False, 1, 1, 2),
    "cluster 8, dot 1, 1 warp, 2 stages": (8, True, 1, 2, 1),
}
VARIANTS = {"package op": lambda *a: kernels.rope_write_attend(*a),
            "package kernel": lambda *a: kernels.rope_write_shares(*a),
            "package op, no trigger": lambda *a: V.op_untriggered(*a)}
for name, (S, dot, chunk, stages, warps) in FORMS.items():
    if S == 16 and not ok16:
        continue
    VARIANTS[name] = functools.partial(V.op, n_splits=S, dot=dot, chunk=chunk, stages=stages,
                                       num_warps=warps)

gen = torch.Generator(device=dev).manual_seed(0)
times, checks, broken = {}, {}, {}
for B in (1, 8, 2, 4, 32):
    for n in ((128, 1024) if B in (1, 8) else (128, 1024)):
        qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
        angle = torch.rand(1024, D // 2, device=dev, generator=gen)
        wide = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
        rows = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
        lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
        args = (qkv, angle.cos().to(dt), angle.sin().to(dt), wide, wide.clone(), rows, lens)
        key = f"batch {B}, {n} keys"
        checks[key] = {}
        ref = kernels.reference_rope_write_attend(qkv.float(), args[1].float(), args[2].float(),
                                                  wide.float(), wide.clone().float(), rows, lens)
        pkg = kernels.rope_write_attend(*args).float()
        for name in [n for n in VARIANTS if n in broken]:
            VARIANTS.pop(name)
        for name, fn in list(VARIANTS.items()):
            try:
                fn(*args)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001  (a variant that fails is recorded, dropped)
                broken[name] = repr(e)[:600]
                res["broken"] = broken
                print("broken", name, broken[name], flush=True)
                VARIANTS.pop(name)
        for name, fn in VARIANTS.items():
            if "kernel" in name or (B not in (1, 8) and name not in ("package op", "cluster 16", "cluster 8",
                                                                    "package op, no trigger")):
                continue
            eager = fn(*args).float()
            c = {"max_err_vs_ref": (eager - ref).abs().max().item(),
                 "max_diff_vs_package": (eager - pkg).abs().max().item()}
            if name.startswith("cluster") and B in (1, 8):
                # new inputs each replay: qkv and lens drawn anew, the replay against eager
                for sync in (True, False):
                    f = functools.partial(fn, sync=sync)
                    sq, sl = qkv.clone(), lens.clone()
                    a2 = (sq, args[1], args[2], wide.clone(), wide.clone(), rows, sl)
                    o = f(*a2)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        o = f(*a2)
                    bad = 0
                    for t in range(100):
                        sq.copy_(torch.randn(sq.shape, device=dev, dtype=dt, generator=gen))
                        sl.copy_(torch.randint(0, n, sl.shape, device=dev, dtype=torch.int32,
                                               generator=gen))
                        g.replay()
                        want = f(*a2)
                        bad += int(not torch.equal(o, want))
                    c["replays_unequal_eager_of_100" + ("" if sync else ", no barrier")] = bad
            checks[key][name] = c
        graphs = {name: graph_of(functools.partial(fn, *args)) for name, fn in VARIANTS.items()
                  if B in (1, 8) or name in ("package op", "package kernel", "cluster 16", "cluster 8",
                                             "package op, no trigger",
                                             "cluster 16, dot 1, 1 warp, 2 stages")}
        got = collections.defaultdict(list)
        for _ in range(5):
            for name, g in graphs.items():
                got[name].append(round(per_call(g), 3))
        times[key] = {name: {"rounds": v, "median": statistics.median(v),
                             "kernels_per_call": kernels_per_call(graphs[name])}
                      for name, v in got.items()}
        print(key, {k: (round(v["median"], 2), v["kernels_per_call"]) for k, v in times[key].items()}, flush=True)
        print("   check", {k: tuple(round(x, 4) if isinstance(x, float) else x for x in v.values()) for k, v in checks[key].items()}, flush=True)
        res["op_alone_us"], res["checks"] = times, checks
        res["seconds"] = round(time.time() - t0, 1)
        json.dump(res, open(out_path, "w"), indent=1)
for k in V.cluster_kernel.device_caches[torch.cuda.current_device()][0].values():
    src = k.asm["ptx"]
    res["ptx_has_barrier_cluster"] = "barrier.cluster.arrive" in src
    res["ptx_cluster_lines"] = [l.strip() for l in src.splitlines() if "cluster" in l][:8]
    break
json.dump(res, open(out_path, "w"), indent=1)
print("ptx", res.get("ptx_has_barrier_cluster"), res.get("ptx_cluster_lines"))
print("done", round(time.time() - t0, 1))
