"""Issue 27, stop 41, call A: the paged step's attention reads a tile of 64 keys at a time (its
blocks' ids together) and a share is whole tiles, so a short row is one program; with more
shares, the last program to arrive combines them (a count per row and K/V head, atomically),
so the step has no combine kernel. 0) the op against its reference on CUDA, three calls in a
row (the counts back to zeros); 1) each attention op alone against the keys, now and before
(kernels.py at a1c9e5c, .final/kernels_a1c9e5c.py, in the same process); 2) the paged step
replayed alone on an ideal host at batch 1 and 8, fused and unfused, now and before; 3) the
step against position at batch 1 and 8; 4) the unfused step at 16 to 256 rows, now and before,
and 32 rows with GEMV_ROWS 32; 5) replay against eager; 6) greedy tokens now against before.
Into OUT.json."""

import collections
import contextlib
import importlib.util
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained, projections
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe43.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)
spec = importlib.util.spec_from_file_location("kernels_before", ".final/kernels_a1c9e5c.py")
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
model = load_pretrained("cuda")


@contextlib.contextmanager
def before():
    saved = kernels.triton_rope_write_attend, kernels.triton_paged_decode_attention
    kernels.triton_rope_write_attend = lambda *a, **k: old.triton_rope_write_attend(*a[:7])
    kernels.triton_paged_decode_attention = old.triton_paged_decode_attention
    torch._dynamo.reset()
    try:
        yield
    finally:
        kernels.triton_rope_write_attend, kernels.triton_paged_decode_attention = saved
        torch._dynamo.reset()


def over(t):
    return time.time() - t_start > budget * t


# 0) the op against its reference on CUDA
g = torch.Generator(device="cuda").manual_seed(0)
checks = []
H, H_kv, D, bs = 8, 4, 32, 16
for B in (1, 8, 40):
    for dtype in (torch.bfloat16, torch.float32):
        lens = torch.randint(0, 1023, (B,), device="cuda", generator=g, dtype=torch.int32)
        lens[0] = 0 if B > 1 else 1000
        if B > 4:
            lens[1:5] = torch.tensor([63, 64, 255, 1022], device="cuda")
        per = 64
        pool_k = torch.randn(B * per + 1, H_kv, bs, D, device="cuda", generator=g).to(dtype)
        pool_v = torch.randn(B * per + 1, H_kv, bs, D, device="cuda", generator=g).to(dtype)
        table = (torch.randperm(B * per, device="cuda", generator=g) + 1).int().view(B, per)
        qkv = torch.randn(B, H + 2 * H_kv, D, device="cuda", generator=g).to(dtype)
        angle = torch.rand(1024, D // 2, device="cuda", generator=g) * 6
        cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
        arrived = torch.zeros(B, H_kv, device="cuda", dtype=torch.int32)
        rk, rv = pool_k.clone(), pool_v.clone()
        want = kernels.reference_rope_write_attend(qkv, cos, sin, rk, rv, table, lens)
        ok, ov = pool_k.clone(), pool_v.clone()
        then = old.triton_rope_write_attend(qkv, cos, sin, ok, ov, table, lens)
        outs = [kernels.rope_write_attend(qkv, cos, sin, pool_k, pool_v, table, lens, arrived)
                for _ in range(3)]
        torch.cuda.synchronize()
        checks.append({
            "batch": B, "dtype": str(dtype), "lens_max": int(lens.max()),
            "max_abs_diff_vs_reference": (outs[0].float() - want.float()).abs().max().item(),
            "max_abs_diff_vs_before": (outs[0].float() - then.float()).abs().max().item(),
            "three_calls_equal": all(torch.equal(o, outs[0]) for o in outs),
            "counts_zero_after": not bool(arrived.any()),
            "keys_written_as_reference": (pool_k.float() - rk.float()).abs().max().item(),
            "values_equal": torch.equal(pool_v, rv)})
        q = torch.randn(B, H, D, device="cuda", generator=g).to(dtype)
        n = lens + 1
        a = kernels.paged_decode_attention(q, pool_k, pool_v, table, n)
        r = kernels.reference_paged_decode_attention(q, pool_k, pool_v, table, n)
        checks[-1]["paged_decode_attention_vs_reference"] = (a.float() - r.float()).abs().max().item()
        print(checks[-1], flush=True)
res["checks"] = checks
save()

# 1) each attention op alone against the keys
t0 = time.time()
res["attention_now"] = pages.attention_times(cfg=model.cfg)
with before():
    res["attention_before"] = pages.attention_times(cfg=model.cfg)
for b in ("1", "8"):
    print("attention", b, "now", res["attention_now"][b], "before", res["attention_before"][b], flush=True)
print("attention in", round(time.time() - t0, 1), "s", flush=True)
save()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


def build(name, idx, compile, was=False):
    try:
        with before() if was else contextlib.nullcontext():
            return pages.replayed(model, idx, name, kv="paged", compile=compile)
    except Exception:  # noqa: BLE001
        res[f"error {name} {idx.shape[0]}"] = traceback.format_exc()[-2500:]
        print(res[f"error {name} {idx.shape[0]}"], flush=True)


def steps(batch, variants, key):
    idx = prompt_batch(batch, 32, "cuda")
    built = [v for v in (build(n, idx, c, w) for n, (c, w) in variants.items()) if v]
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print(batch, f"{r['name']:30s}", r["step_us"]["median"], "us", r["kernels"], "kernels", flush=True)
    res[key] = rows
    save()


# 2) the step at batch 1 and 8
V = {"paged fused": (True, False), "paged fused, before": (True, True),
     "paged": (False, False), "paged, before": (False, True)}
for batch in (1, 8):
    steps(batch, V, f"batch_{batch}")
for b in (1, 8):
    for r in res.get(f"batch_{b}", []):
        if r["name"] == "paged fused":
            print(b, [f"{c} {n}" for n, c in r["kernel_names"]], flush=True)

# 3) the step against position
n = model.cfg.max_seq_len - 32
for batch in (1, 8):
    v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), "paged fused", kv="paged", compile=True, room=n)
    times = peers.position_sweep(v, n, per=16)
    sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
             "paged fused_us": [round(t, 1) for t in times]}
    sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
    sweep["spans"] = pages.bin_spans(sweep)
    res[f"sweep_{batch}"] = sweep
    print("sweep", batch, sweep["paged fused_us"][:4], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
    save()

# 5) replay against eager
t0 = time.time()
try:
    res["exactness"] = pages.paged_exactness(model)
except Exception:  # noqa: BLE001
    res["exactness_error"] = traceback.format_exc()[-2500:]
print("exactness", res.get("exactness"), round(time.time() - t0, 1), "s", flush=True)
save()

# 6) greedy tokens: now against before
tokens = {}
for batch in (1, 8):
    idx = prompt_batch(batch, 32, "cuda")
    now = GraphDecoder(model, batch, kv="paged", compile=True).generate(idx, 256)
    with before():
        then = GraphDecoder(model, batch, kv="paged", compile=True).generate(idx, 256)
    same = now == then
    tokens[f"batch {batch}"] = {"share_equal": round(same.float().mean().item(), 4),
                                "rows_identical": int(same.all(1).sum()), "rows": batch}
    print("tokens", batch, tokens[f"batch {batch}"], flush=True)
res["greedy_now_vs_before"] = tokens
save()

# 4) the unfused step at 16 to 256 rows, now and before; 32 rows by hand
V2 = {"paged": (False, False), "paged, before": (False, True)}
for batch in (16, 32, 64, 128, 256):
    if over(0.85):
        res.setdefault("skipped", []).append(f"batch {batch}")
        continue
    steps(batch, V2, f"batch_{batch}")
if not over(0.9):
    projections.GEMV_ROWS = 32
    steps(32, {"paged, GEMV_ROWS 32": (False, False)}, "batch_32_by_hand")
    projections.GEMV_ROWS = 16
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
