"""Issue 27, call C: the hand-written projection kernels (projections.py) and PDL on the
course's own kernels. 1) the projection kernels against their references on CUDA, bf16 and
float32; 2) the paged step replayed alone on an ideal host at batch 1, 8 (then 16, 32 while
time is left), the package now and with its parts turned off: GEMV_ROWS=0 (no hand-written
projections), launches_pdl False (no PDL on the course's kernels), both (the step as before);
unfused too; gpt-fast + PDL in the same run: µs, kernels, names; 3) replay against the eager
paged step, bit for bit (pages.paged_exactness); 4) greedy tokens now against before.
Into OUT.json."""

import collections
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained, projections
from tinyllm.graphs import COURSE_COMPILE
from tinyllm.lab import bench, gptfast, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe42.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)
model = load_pretrained("cuda")
PDL = kernels.launches_pdl


def setting(gemv_rows, pdl):
    projections.GEMV_ROWS = gemv_rows
    f = PDL if pdl else (lambda device: False)
    kernels.launches_pdl = projections.launches_pdl = f
    torch._dynamo.reset()


# 1) the kernels against their references
g = torch.Generator(device="cuda").manual_seed(0)
checks = []
for dtype in (torch.bfloat16, torch.float32):
    for B, K, N in ((1, 256, 512), (8, 768, 256), (16, 256, 1536), (40, 256, 258)):
        x = torch.randn(B, K, device="cuda", generator=g).to(dtype)
        nw = torch.randn(K, device="cuda", generator=g).to(dtype)
        w = (torch.randn(N, K, device="cuda", generator=g) * 0.05).to(dtype)
        r = torch.randn(B, N, device="cuda", generator=g).to(dtype)
        for name, got, want in (
            ("norm_project", projections.norm_project(x, nw, w, 1e-5), projections.reference_norm_project(x, nw, w, 1e-5)),
            ("norm_swiglu", projections.norm_swiglu(x, nw, w, 1e-5), projections.reference_norm_swiglu(x, nw, w, 1e-5)),
            ("project_add", projections.project_add(x, w, r), projections.reference_project_add(x, w, r)),
        ):
            d = (got.float() - want.float()).abs().max().item()
            checks.append({"op": name, "dtype": str(dtype), "shape": [B, K, N], "max_abs_diff": d,
                           "ref_max": want.float().abs().max().item()})
res["kernel_checks"] = checks
print("kernel checks, worst relative:", max(c["max_abs_diff"] / max(1, c["ref_max"]) for c in checks), flush=True)
save()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


VARIANTS = {  # name: (kv compile, GEMV_ROWS, PDL on the course's kernels)
    "paged fused": (True, 16, True),
    "paged fused, no hand-written projections": (True, 0, True),
    "paged fused, hand-written projections without PDL": (True, 16, False),
    "paged fused, neither": (True, 0, False),
    "paged": (False, 16, True),
    "paged, neither": (False, 0, False),
}
extra = {k: v for k, v in COURSE_COMPILE["options"].items() if k not in gptfast.GENERATE_PY_INDUCTOR}
def steps(batches):
    for batch in batches:
        if batch > 8 and time.time() - t_start > budget * 0.8:
            res.setdefault("skipped", []).append(f"steps at batch {batch}")
            continue
        idx = prompt_batch(batch, 32, "cuda")
        built = []
        for name, (compile, rows, pdl) in VARIANTS.items():
            if batch > 8 and name not in ("paged fused", "paged fused, neither"):
                continue
            setting(max(rows, batch) if rows else 0, pdl)
            t0 = time.time()
            try:
                built.append(pages.replayed(model, idx, name, kv="paged", compile=compile))
            except Exception:  # noqa: BLE001
                res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
                print(res[f"error {name} {batch}"], flush=True)
            print(batch, name, "built in", round(time.time() - t0, 1), "s", flush=True)
        if batch <= 8:
            setting(16, True)
            built.append(pages.ideal_gptfast(model, idx, 256, "gpt-fast + PDL, ideal host", extra))
        rows = peers.measure(built, repeats=5, keep_trace=True)
        for r in rows:
            r["kernel_names"] = names(r.pop("trace"))
            print(batch, f"{r['name']:55s}", r["step_us"]["median"], "us", r["kernels"], "kernels", flush=True)
        res[f"batch_{batch}"] = rows
        save()


# 3b) the step against position, replayed alone, batch 1 and 8
n = model.cfg.max_seq_len - 32
for batch in (1, 8):
    setting(16, True)
    v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), "paged fused", kv="paged", compile=True, room=n)
    times = peers.position_sweep(v, n, per=16)  # each bin's 16 steps back to back
    sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
             "paged fused_us": [round(t, 1) for t in times]}
    sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
    sweep["spans"] = pages.bin_spans(sweep)
    res[f"sweep_{batch}"] = sweep
    print("sweep", batch, sweep["paged fused_us"][:4], sweep["paged fused_us"][-2:], sweep["long_over_short"], sweep["spans"], flush=True)
    save()

steps((1, 8))
setting(16, True)
for b in (1, 8):
    for r in res.get(f"batch_{b}", []):
        if r["name"] == "paged fused":
            print(b, [f"{c} {n}" for n, c in r["kernel_names"]], flush=True)

# 3) replay against eager
t0 = time.time()
try:
    res["exactness"] = pages.paged_exactness(model)
except Exception:  # noqa: BLE001
    res["exactness_error"] = traceback.format_exc()[-2500:]
print("exactness", res.get("exactness"), round(time.time() - t0, 1), "s", flush=True)
save()

# 3c) the rows past one tile: is GEMV_ROWS = 16 the right edge?
steps((16, 32))

# 4) greedy tokens: the hand-written projections against the plain ops'

tokens = {}
for batch in (1, 8):
    idx = prompt_batch(batch, 32, "cuda")
    for compile in (True,):
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"tokens batch {batch} compile {compile}")
            continue
        pair = []
        for rows, pdl in ((16, True), (0, False)):
            setting(rows, pdl)
            pair.append(GraphDecoder(model, batch, kv="paged", compile=compile).generate(idx, 256))
        same = pair[0] == pair[1]
        tokens[f"batch {batch}, compile {compile}"] = {
            "share_equal": round(same.float().mean().item(), 4),
            "rows_identical": int(same.all(1).sum()), "rows": batch}
        print("tokens", batch, compile, tokens[f"batch {batch}, compile {compile}"], flush=True)
res["greedy_hand_vs_plain_ops"] = tokens
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
