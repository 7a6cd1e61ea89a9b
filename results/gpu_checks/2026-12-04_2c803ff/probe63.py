"""Issue 27, stop 45, call K: the package's fused kernel against the same kernel that, where
the table is no wider than the shares (batch 1 and 2 on the H200: share s is block s), reads
its block and keys with the row's length, not after it (.final/variants3.py), in one
process: the op alone (a graph of 20 calls, median of 30 replays, 3 rounds interleaved), with
its combine and as its kernel alone, batch 1, 2 and 8 (8: 16 shares, the same code, a
control), 128 and 1024 keys, a table of 64 blocks; the paged fused step replayed alone at
batch 1, 2 and 8 (medians of 5, interleaved); against position at batch 1; replay against
eager at batch 1 and 2; greedy tokens against the package's."""

import collections
import functools
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe63.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)

sys.path.insert(0, ".final")
import variants3  # noqa: E402


class Bound:
    """A kernel with extra constexprs bound."""
    def __init__(self, kern, **extra):
        self.kern, self.extra = kern, extra

    def __getitem__(self, grid):
        return lambda *a, **k: self.kern[grid](*a, **{**k, **self.extra})


NOW = kernels.triton_rope_write_attend


def fixed(*a, **k):
    return NOW(*a, kernels=(Bound(variants3.fixed_kernel, WIDTH=a[5].shape[1]), kernels.combine_kernel), **k)


VARIANTS = {"package": NOW, "fixed blocks": fixed}
ALL = list(VARIANTS)


def setting(name):
    kernels.triton_rope_write_attend = VARIANTS[name]
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


H, H_kv, D = 8, 4, 32
dev, dt = "cuda", torch.bfloat16


def per_call(fn, calls=20, repeats=30) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return round(statistics.median(times), 2)


# 1) the op alone, in the table width of the step (64 blocks), at 128 and 1024 keys
try:
    gen = torch.Generator(device=dev).manual_seed(0)
    alone = {}
    for B in (1, 2, 8):
        for n in (128, 1024):
            pool = torch.randn(B * 64 + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            table = (torch.arange(B * 64, device=dev, dtype=torch.int32) + 1).view(B, 64)
            lens = torch.full((B,), n, device=dev, dtype=torch.int32)
            qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
            angle = torch.rand(1024, D // 2, device=dev, generator=gen)
            args = (qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens - 1)
            got = collections.defaultdict(list)
            for _ in range(3):
                for name, fn in VARIANTS.items():
                    got[f"op: {name}"].append(per_call(functools.partial(fn, *args)))
                    got[f"kernel: {name}"].append(per_call(functools.partial(fn, *args, shares=True)))
            alone[f"batch {B}, {n} keys"] = {k: {"rounds": v, "median": statistics.median(v)} for k, v in got.items()}
            alone[f"batch {B}, {n} keys"]["shares"] = kernels.split_count(B, H_kv, dev)
            alone[f"batch {B}, {n} keys"]["tensor_cores"] = kernels.tensor_cores(64, kernels.split_count(B, H_kv, dev))
            print("alone", B, n, json.dumps({k: statistics.median(v) for k, v in got.items()}), flush=True)
    res["op_alone_us"] = alone
except Exception:  # noqa: BLE001
    res["error op alone"] = traceback.format_exc()[-2500:]
    print(res["error op alone"], flush=True)
save()

# 2) the paged fused step, the variants interleaved
model = load_pretrained("cuda")
for batch in (1, 2, 8):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in ALL:
        setting(name)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print("step", batch, f"{r['name']:20s}", r["step_us"]["median"], "us", r["step_us"], r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()
    del built

# 3) the step against position; 4) tokens against the kernel before; 5) replay against eager
n = model.cfg.max_seq_len - 32
for batch, names_ in ((1, ALL),):
    for name in names_:
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"sweep {name} {batch}")
            continue
        setting(name)
        v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), name, kv="paged", compile=True, room=n)
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault(f"sweep_{batch}", {})[name] = sweep
        print("sweep", batch, f"{name:20s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        save()
base = {}
for name in ALL:
    setting(name)
    for batch in (1, 2):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        if batch not in base:
            base[batch] = toks
        same = toks == base[batch]
        res.setdefault("greedy_vs_before", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    save()
setting("fixed blocks")
try:
    res["exactness"] = pages.paged_exactness(model, batches=(1, 2))
except Exception:  # noqa: BLE001
    res["exactness"] = traceback.format_exc()[-2500:]
e = res["exactness"]
print("exact", e if isinstance(e, str) else (e["all_equal"], e["steps"], e.get("batches")), flush=True)
print("tokens", json.dumps(res.get("greedy_vs_before")), flush=True)
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
