"""Issue 27: the paged step's fused attention with every K/V head of a row in one program
(proto83/variant83.py: grid (B, S), H_kv times fewer programs), against the package's kernel
(grid (B, H_kv, S)), in one process:

- 'op_checks_bf16': at 1, 2, 8 and 16 rows, random lengths, the variant's op against the
  package's and the reference, and its pool writes against the package's.
- 'op_alone_us': at 1 and 8 rows, 40, 128 and 1024 keys (a table of 64 blocks, lens = keys -
  1), timed as lab.pages.attention_times times it (a graph of 20 calls, a replay launched
  before the timed one, median of 30 replays), 3 rounds interleaved: 'op' with its combine,
  'kernel' alone (splits=True); the package at its launch, the variant at S splits and W
  warps.
- 'batch_<B>': the paged fused step (pages.replayed, compile=True) at 1, 2, 4, 8 and 16 rows,
  'package' and the variant ('heads, 4 warps', 'heads, 2 warps') at the package's splits,
  interleaved (peers.measure, 5 repeats).
- 'sweep_8': the step against position at 8 rows, package and variant (4 warps).
- 'exactness': pages.paged_exactness with the variant (replay against eager, bit for bit).
- 'greedy_vs_package': greedy tokens of 256 steps at 1 and 8 rows, the variant against the
  package.
"""

import collections
import json
import statistics
import sys
import time
import traceback

import torch

from proto83 import variant83 as V
from tinyllm import GraphDecoder, load_pretrained
from tinyllm import kernels as K
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path = sys.argv[1]
t0 = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 proto83/probe83.py OUT.json")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)  # noqa: E731
PACKAGE = K.triton_rope_write_attend


def use(warps):
    """The step's fused op: the package's (None) or the variant at the package's splits."""
    if warps is None:
        K.triton_rope_write_attend = PACKAGE
        return

    def variant(qkv, cos, sin, k_cache, v_cache, block_table, lens, splits=False, **_):
        return V.launch(qkv, cos, sin, k_cache, v_cache, block_table, lens, num_warps=warps,
                        splits=splits)  # fmt: skip

    K.triton_rope_write_attend = variant


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
        graph.replay()
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return round(statistics.median(times), 3)


H, H_kv, D, dev, dt = 8, 4, 32, "cuda", torch.bfloat16
gen = torch.Generator(device=dev).manual_seed(0)


def inputs(B, n, width=64):
    qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
    angle = torch.rand(1024, D // 2, device=dev, generator=gen) * 6
    cos, sin = angle.cos().to(dt), angle.sin().to(dt)
    pk = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
    pv = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
    table = (torch.randperm(B * width, device=dev, generator=gen) + 1).int().view(B, width)
    lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
    return qkv, cos, sin, pk, pv, table, lens


# 1) checks
try:
    checks = {}
    for B in (1, 2, 8, 16):
        qkv, cos, sin, pk, pv, table, lens = inputs(B, 1)
        lens = torch.randint(0, 1023, (B,), device=dev, generator=gen, dtype=torch.int32)
        k1, v1, k2, v2, k3, v3 = (t.clone() for t in (pk, pv, pk, pv, pk, pv))
        pkg = K.rope_write_attend(qkv, cos, sin, k1, v1, table, lens)
        var = V.launch(qkv, cos, sin, k2, v2, table, lens)
        ref = K.reference_rope_write_attend(qkv, cos, sin, k3, v3, table, lens)
        checks[f"batch {B}"] = {
            "splits": K.split_count(B, H_kv, dev), "writes_equal_package": bool(
                torch.equal(k1, k2) and torch.equal(v1, v2)),
            "vs_package": (var.float() - pkg.float()).abs().max().item(),
            "vs_reference": (var.float() - ref.float()).abs().max().item(),
            "package_vs_reference": (pkg.float() - ref.float()).abs().max().item(),
            "ref_max": ref.abs().max().item()}
    res["op_checks_bf16"] = checks
    print("checks", json.dumps(checks), flush=True)
except Exception:  # noqa: BLE001
    res["error checks"] = traceback.format_exc()[-2500:]
    print(res["error checks"], flush=True)
save()

# 2) the op alone
try:
    table_us = {}
    for B in (1, 8):
        for n in (40, 128, 1024):
            qkv, cos, sin, pk, pv, table, lens = inputs(B, n)
            args = (qkv, cos, sin, pk, pv, table, lens)
            fns = {"package op": lambda: K.rope_write_attend(*args),
                   "package kernel": lambda: K.rope_write_splits(*args)}
            for S in (8, 16, 32, 64):
                for W in (2, 4):
                    fns[f"heads S{S} W{W} op"] = lambda S=S, W=W: V.launch(
                        *args, n_splits=S, num_warps=W)
                    fns[f"heads S{S} W{W} kernel"] = lambda S=S, W=W: V.launch(
                        *args, n_splits=S, num_warps=W, splits=True)
            rounds = {k: [] for k in fns}
            for _ in range(3):
                for k, fn in fns.items():
                    rounds[k].append(per_call(fn))
            row = {k: {"rounds": v, "median": statistics.median(v)} for k, v in rounds.items()}
            row["package_splits"] = K.split_count(B, H_kv, dev)
            table_us[f"batch {B}, {n} keys"] = row
            best = sorted((v["median"], k) for k, v in row.items()
                          if isinstance(v, dict) and k.endswith(" op"))[:4]  # fmt: skip
            print(B, n, "package op", row["package op"]["median"], "kernel",
                  row["package kernel"]["median"], "best ops", best, flush=True)
            res["op_alone_us"] = table_us
            save()
except Exception:  # noqa: BLE001
    res["error op_alone"] = traceback.format_exc()[-2500:]
    print(res["error op_alone"], flush=True)
save()
model = load_pretrained("cuda")


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


# 3) the step
FORMS = {"package": None, "heads, 4 warps": 4, "heads, 2 warps": 2}
for batch in (8, 1, 2, 16, 4):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name, warps in FORMS.items():
        use(warps)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    use(None)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print(batch, f"{r['name']:16s}", r["step_us"]["median"], "us", r["kernels"], "kernels",
              flush=True)  # fmt: skip
    res[f"batch_{batch}"] = rows
    save()

use(4)
try:
    res["exactness"] = pages.paged_exactness(model)
    print("exact", res["exactness"], flush=True)
except Exception:  # noqa: BLE001
    res["error exactness"] = traceback.format_exc()[-2500:]
use(None)
save()
n = model.cfg.max_seq_len - 32
toks = {}
for name in ("package", "heads, 4 warps"):
    use(FORMS[name])
    try:
        v = pages.replayed(model, prompt_batch(8, 32, "cuda"), name, kv="paged", compile=True,
                           room=n)  # fmt: skip
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault("sweep_8", {})[name] = sweep
        print("sweep", name, sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:],
              sweep["long_over_short"], flush=True)  # fmt: skip
        for batch in (1, 8):
            toks[name, batch] = GraphDecoder(model, batch, kv="paged", compile=True).generate(
                prompt_batch(batch, 32, "cuda"), 256)
    except Exception:  # noqa: BLE001
        res[f"error sweep {name}"] = traceback.format_exc()[-2500:]
        print(res[f"error sweep {name}"], flush=True)
    use(None)
    save()
for batch in (1, 8):
    if ("package", batch) in toks and ("heads, 4 warps", batch) in toks:
        same = toks["heads, 4 warps", batch] == toks["package", batch]
        res.setdefault("greedy_vs_package", {})[f"batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4),
            "rows_identical": int(same.all(1).sum()), "rows": batch}
print("greedy", res.get("greedy_vs_package"), flush=True)
res["seconds"] = round(time.time() - t0, 1)
save()
print("done in", res["seconds"], "s", flush=True)
