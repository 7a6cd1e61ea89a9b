"""Issue 27: the paged steps replayed alone (an ideal host, lab.pages.replayed) at positions
32-75 and from 960 on, batch 1 and 8, unfused and compiled: the step's growth with length,
the kernels only. Into OUT.json."""
import json
import sys

import torch

from tinyllm import load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

model = load_pretrained("cuda")
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/long27.py OUT.json"), "rows": []}
for B in (1, 8):
    for compile in (False, True):
        torch._dynamo.reset()
        name = "paged fused" if compile else "paged"
        short = pages.replayed(model, prompt_batch(B, 32, "cuda"), f"{name}, positions 32-75", kv="paged", compile=compile)
        long = pages.replayed(model, prompt_batch(B, 960, "cuda"), f"{name}, positions 960-1003", kv="paged", compile=compile, room=60)
        for r in peers.measure([short, long], repeats=5):
            r["batch"] = B
            res["rows"].append(r)
            print(B, r["name"], r["step_us"], r["kernels"], flush=True)
        json.dump(res, open(sys.argv[1], "w"), indent=1)
