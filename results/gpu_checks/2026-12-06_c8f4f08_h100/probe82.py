"""Issue 27: the attention's combine folded into the output projection at 2 to 16 rows too.
Before, at more than one row combine_project_add ran the combine kernel, then the projection
on a tile of 16 rows; now each row's programs combine its own splits in the prologue, as at
one row (projections.triton_projection with splits: one row a program). In one process:

- 'op_checks_bf16': at 1, 2, 8 and 16 rows, the fold against the step before's pair
  (rope_write_attend, then project_add) and against the reference.
- 'op_alone_us': at 1 and 8 rows, 128 and 1024 keys (a table of 64 blocks, lens = keys - 1),
  each timed as lab.pages.attention_times times it (a graph of 20 calls, a replay launched
  before the timed one, median of 30 replays), 3 rounds interleaved: 'op' rope_write_attend
  (the attention with its combine kernel), 'kernel' rope_write_splits, 'project' project_add,
  'fold' combine_project_add on the kernel's splits, 'combine' the combine kernel alone,
  'op + project' (the pair the step ran before at 2 to 16 rows), 'kernel + fold' (the pair it
  runs now). The attention's share of a pair: the pair minus 'project'.
- 'batch_<B>': the paged fused step (pages.replayed, compile=True) at 2, 4, 8 and 16 rows,
  before (projections.FOLD_ROWS = 1: main's step), now (16: the fold at every batch) and, at 16
  rows, 'fold <= 8' (the branch's rule), interleaved (peers.measure, 5 repeats), kernels and
  their names.
- 'sweep_8': the step against position at 8 rows, before and now.
- 'exactness': pages.paged_exactness now (replay against eager, bit for bit, 1, 3, 8 rows).
- 'greedy_vs_before': greedy tokens of 256 steps at 8 and 16 rows, now against before.
"""

import collections
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels as K, load_pretrained, projections as P
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path = sys.argv[1]
t0 = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 proto82/probe82.py OUT.json")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)  # noqa: E731
FOLDS = {"before": 1, "now": 16, "fold <= 8": 8}  # projections.FOLD_ROWS of each form


def setting(name):
    P.FOLD_ROWS = FOLDS[name]
    torch._dynamo.reset()


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


P.FOLD_ROWS = 16  # the checks and the ops alone: the fold at every batch
H, H_kv, D, dev, dt = 8, 4, 32, "cuda", torch.bfloat16
gen = torch.Generator(device=dev).manual_seed(0)


def inputs(B, n, width=64):
    qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
    angle = torch.rand(1024, D // 2, device=dev, generator=gen) * 6
    cos, sin = angle.cos().to(dt), angle.sin().to(dt)
    pool_k = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
    pool_v = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
    table = (torch.randperm(B * width, device=dev, generator=gen) + 1).int().view(B, width)
    lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
    wo = (torch.randn(256, 256, device=dev, generator=gen) * 0.05).to(dt)
    x = torch.randn(B, 256, device=dev, dtype=dt, generator=gen)
    return qkv, cos, sin, pool_k, pool_v, table, lens, wo, x


# 1) checks
try:
    checks = {}
    for B in (1, 2, 8, 16):
        qkv, cos, sin, pk, pv, table, lens, wo, x = inputs(B, 1)
        lens = torch.randint(0, 1023, (B,), device=dev, generator=gen, dtype=torch.int32)
        k1, v1, k2, v2 = pk.clone(), pv.clone(), pk.clone(), pv.clone()
        y = K.rope_write_attend(qkv, cos, sin, k1, v1, table, lens)
        before = P.project_add(y.view(B, -1), wo, x)
        splits = K.rope_write_splits(qkv, cos, sin, k2, v2, table, lens)
        now = P.combine_project_add(*splits, wo, x)
        ref = P.reference_combine_project_add(*splits, wo, x)
        one = P.combine_project_add(*(s[-1:] for s in splits), wo, x[-1:])
        checks[f"batch {B}"] = {
            "splits": splits[0].shape[2], "same_writes": bool(torch.equal(k1, k2) and torch.equal(v1, v2)),
            "now_vs_before": (now.float() - before.float()).abs().max().item(),
            "now_vs_reference": (now.float() - ref.float()).abs().max().item(),
            "before_vs_reference": (before.float() - ref.float()).abs().max().item(),
            "ref_max": ref.abs().max().item(),
            "last_row_alone_equal": bool(torch.equal(now[-1:], one))}
    res["op_checks_bf16"] = checks
    print("checks", json.dumps(checks), flush=True)
except Exception:  # noqa: BLE001
    res["error checks"] = traceback.format_exc()[-2500:]
    print(res["error checks"], flush=True)
save()

# 2) the ops alone
try:
    table_us = {}
    for B in (1, 8):
        for n in (128, 1024):
            qkv, cos, sin, pk, pv, table, lens, wo, x = inputs(B, n)
            y = K.rope_write_attend(qkv, cos, sin, pk, pv, table, lens)
            sp = K.rope_write_splits(qkv, cos, sin, pk, pv, table, lens)
            out = torch.empty(B, H, D, device=dev, dtype=dt)
            fns = {
                "op": lambda: K.rope_write_attend(qkv, cos, sin, pk, pv, table, lens),
                "kernel": lambda: K.rope_write_splits(qkv, cos, sin, pk, pv, table, lens),
                "project": lambda: P.project_add(y.view(B, -1), wo, x),
                "fold": lambda: P.combine_project_add(*sp, wo, x),
                "combine": lambda: K.launch_combine(*sp, out),
                "op + project": lambda: P.project_add(
                    K.rope_write_attend(qkv, cos, sin, pk, pv, table, lens).view(B, -1), wo, x),
                "kernel + fold": lambda: P.combine_project_add(
                    *K.rope_write_splits(qkv, cos, sin, pk, pv, table, lens), wo, x),
            }
            rounds = {k: [] for k in fns}
            for _ in range(3):
                for k, fn in fns.items():
                    rounds[k].append(per_call(fn))
            row = {k: {"rounds": v, "median": statistics.median(v)} for k, v in rounds.items()}
            row["splits"] = sp[0].shape[2]
            table_us[f"batch {B}, {n} keys"] = row
            print(B, n, {k: v["median"] for k, v in row.items() if k != "splits"}, flush=True)
    res["op_alone_us"] = table_us
except Exception:  # noqa: BLE001
    res["error op_alone"] = traceback.format_exc()[-2500:]
    print(res["error op_alone"], flush=True)
save()
model = load_pretrained("cuda")


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


# 3) the step, before and now, at 2 to 16 rows
for batch in (8, 2, 16, 4):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in FOLDS if batch > 8 else ("before", "now"):
        setting(name)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print(batch, f"{r['name']:8s}", r["step_us"]["median"], "us", r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()

setting("now")
try:
    res["exactness"] = pages.paged_exactness(model)
    print("exact", res["exactness"], flush=True)
except Exception:  # noqa: BLE001
    res["error exactness"] = traceback.format_exc()[-2500:]
save()
# 4) against position at 8 rows; 5) exactness; 6) greedy tokens
n = model.cfg.max_seq_len - 32
toks = {}
for name in ("before", "now"):
    setting(name)
    try:
        v = pages.replayed(model, prompt_batch(8, 32, "cuda"), name, kv="paged", compile=True, room=n)
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault("sweep_8", {})[name] = sweep
        print("sweep", name, sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        for batch in (8, 16):
            toks[name, batch] = GraphDecoder(model, batch, kv="paged", compile=True).generate(
                prompt_batch(batch, 32, "cuda"), 256)
    except Exception:  # noqa: BLE001
        res[f"error sweep {name}"] = traceback.format_exc()[-2500:]
        print(res[f"error sweep {name}"], flush=True)
    save()
for batch in (8, 16):
    if ("now", batch) in toks and ("before", batch) in toks:
        same = toks["now", batch] == toks["before", batch]
        res.setdefault("greedy_vs_before", {})[f"batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()),
            "rows": batch}
print("greedy", res.get("greedy_vs_before"), flush=True)
res["seconds"] = round(time.time() - t0, 1)
save()
print("done in", res["seconds"], "s", flush=True)
