"""Issue 27, stop 41, call C: the paged fused step at batch 1, 2, 4 and 8 with split_count's
shares (up to STEP_SHARES = 64) against 16 shares at every batch (the rule before), replayed
alone on an ideal host, interleaved, medians of 5. Into OUT.json."""

import json
import sys
import time

import torch

from tinyllm import kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path = sys.argv[1]
t_start = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe45.py OUT.json")}
model = load_pretrained("cuda")
SPLIT_COUNT = kernels.split_count
for batch in (1, 2, 4, 8):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name, rule in (("split_count", SPLIT_COUNT), ("16 shares", lambda B, H_kv, device: 16)):
        kernels.split_count = rule
        torch._dynamo.reset()
        built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
    kernels.split_count = SPLIT_COUNT
    rows = peers.measure(built, repeats=5)
    for r in rows:
        r["shares"] = SPLIT_COUNT(batch, 4, "cuda") if r["name"] == "split_count" else 16
        print(batch, f"{r['name']:12s}", r["shares"], r["step_us"]["median"], "us", r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    json.dump(res, open(out_path, "w"), indent=1)
res["seconds"] = round(time.time() - t_start, 1)
json.dump(res, open(out_path, "w"), indent=1)
print("done in", res["seconds"], "s")
