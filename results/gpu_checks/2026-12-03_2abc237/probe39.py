"""Issue 27: can Inductor's own settings cut the paged fused step's kernels? The paged step
(GraphDecoder(kv="paged")) compiled with the course's options (coordinate-descent tuning, PDL)
and with each of: max_autotune (Triton GEMM templates, with epilogue and prologue fusion),
max_autotune with Triton GEMMs only, aggressive_fusion, combo_kernels; each replayed alone
from its graph on an ideal host (lab.pages.replayed), interleaved repeats (peers.measure):
µs per step, kernels per step and their names; logits against the course's compile, max
difference. Batch 1, then batch 8 while time is left. Into OUT.json."""

import collections
import json
import sys
import time
import traceback

import torch

from tinyllm import load_pretrained
from tinyllm.graphs import COURSE_COMPILE
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe39.py OUT.json {budget:g}")}
base = COURSE_COMPILE["options"]
VARIANTS = {
    "course": base,
    "max_autotune": base | {"max_autotune": True},
    "max_autotune, Triton GEMMs": base | {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"},
    "aggressive_fusion": base | {"aggressive_fusion": True},
    "combo_kernels": base | {"combo_kernels": True},
}
model = load_pretrained("cuda")


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


for batch in (1, 8):
    idx = prompt_batch(batch, 32, "cuda")
    built, logits = [], {}
    for name, options in VARIANTS.items():
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"{name}, batch {batch}")
            continue
        torch._dynamo.reset()
        t0 = time.time()
        try:
            v = pages.replayed(model, idx, f"{name}", kv="paged",
                               compile={"dynamic": False, "fullgraph": True, "options": options})
            v.reset()
            logits[name] = v.step(v.tok).float().clone()
            built.append(v)
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
        print(batch, name, "built in", round(time.time() - t0, 1), "s", flush=True)
    if not built:
        continue
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        r["options"] = VARIANTS[r["name"]]
        if "course" in logits and r["name"] in logits:
            r["max_abs_diff_vs_course"] = (logits[r["name"]] - logits["course"]).abs().max().item()
        print(batch, r["name"], r["step_us"]["median"], "us", r["kernels"], "kernels", r["setup_s"], "s",
              r.get("max_abs_diff_vs_course"), flush=True)
    res[f"batch_{batch}"] = rows
    json.dump(res, open(out_path, "w"), indent=1)
for b in (1, 8):
    for r in res.get(f"batch_{b}", []):
        print(b, r["name"], r["kernels"], [f"{c} {n}" for n, c in r["kernel_names"]][:30])
json.dump(res, open(out_path, "w"), indent=1)
