"""Issue 27, for the next session: the package's op alone (triton_rope_write_attend, with its
combine when split) at 1 and 8 rows and 128 and 1024 keys, in a table of 64 blocks, for every
count of shares 1 to 64 and 1, 2 or 4 warps, through the launcher's own arguments (no kernel
changed). Timed as lab.pages.attention_times times it: a graph of 20 calls, a replay launched
first, the events around a second; the median of 30 replays, 3 rounds; no profiler in the
process. Also the kernel alone (shares=True: no combine) and each output's largest difference
from the package's default launch."""

import json
import statistics
import sys

import torch

from tinyllm import kernels as K
from tinyllm.lab import bench

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe75.py OUT.json"),
       "default_shares": {}, "points": {}}
H, H_kv, D, dev, dt, width, bs = 8, 4, 32, "cuda", torch.bfloat16, 64, 16
gen = torch.Generator(device=dev).manual_seed(0)
kept = []


def inputs(B, n_old):
    qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
    angle = torch.rand(1024, D // 2, device=dev, generator=gen)
    pool = torch.randn(B * width + 1, H_kv, bs, D, device=dev, dtype=dt, generator=gen)
    table = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
    lens = torch.as_tensor(n_old, device=dev, dtype=torch.int32).expand(B).contiguous()
    return qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens


def per_call(fn, calls=20, repeats=30):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    kept.append(g)
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        g.replay()
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


for B in (1, 8):
    res["default_shares"][str(B)] = K.split_count(B, H_kv, torch.device(dev))
    for n in (128, 1024):
        args = inputs(B, n - 1)
        kept.append(args)
        want = K.triton_rope_write_attend(*args).float()
        point = {}
        for s in (1, 2, 4, 8, 16, 32, 64):
            for w in (1, 2, 4):
                op = lambda a=args, s=s, w=w: K.triton_rope_write_attend(*a, n_splits=s, num_warps=w)
                got = op().float()
                alone = lambda a=args, s=s, w=w: K.triton_rope_write_attend(
                    *a, n_splits=s, num_warps=w, shares=True)
                point[f"{s} shares, {w} warps"] = {
                    "op": [round(per_call(op), 3) for _ in range(3)],
                    "kernel": [round(per_call(alone), 3) for _ in range(3)] if s > 1 else None,
                    "max_diff": float((got - want).abs().max()),
                    "dot": K.tensor_cores(width, s)}
        point["package"] = [round(per_call(lambda a=args: K.triton_rope_write_attend(*a)), 3)
                            for _ in range(3)]
        res["points"][f"batch {B}, {n} keys"] = point
        best = sorted(point.items(), key=lambda kv: 99 if kv[0] == "package" else
                      statistics.median(kv[1]["op"]))[:4]
        print(f"batch {B}, {n} keys: package {statistics.median(point['package'])}; best",
              [(k, statistics.median(v["op"]), v["max_diff"]) for k, v in best], flush=True)
        json.dump(res, open(out_path, "w"), indent=1)
        del kept[:]
        kept.append(args)
