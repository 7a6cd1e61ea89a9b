"""The bench's paged section (lab.pages), part by part, each kept if another fails: into
OUT/paged.json with the bench's provenance."""

import json
import sys
import time
import traceback

import torch

from tinyllm import load_pretrained
from tinyllm.graphs import COURSE_COMPILE
from tinyllm.lab import bench, gptfast, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path = sys.argv[1]
res = {"provenance": bench.provenance("PYTHONPATH=<copy> python3 results/probes/paged_section.py OUT.json")}


def save():
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


def part(name, fn):
    t0 = time.time()
    try:
        res[name] = fn()
    except Exception:  # noqa: BLE001
        res[name + "_error"] = traceback.format_exc()[-3000:]
    res.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
    print(name, res["seconds"][name], "error" if name + "_error" in res else "ok", flush=True)
    save()


model = load_pretrained("cuda")
idx = prompt_batch(1, 32, "cuda")
extra = {k: v for k, v in COURSE_COMPILE["options"].items() if k not in gptfast.GENERATE_PY_INDUCTOR}
res["gpt_fast_extra"], res["gpt_fast_cache"], res["batch"], res["positions"] = extra, 288, 1, [32, 75]
part("exactness", lambda: pages.paged_exactness(model))
part("attention", lambda: pages.attention_times(cfg=model.cfg))
part("capture", lambda: pages.capture_sizes(model))
torch._dynamo.reset()
part("rows", lambda: peers.measure(pages.equal_footing(model, idx, extra), repeats=5))
part("sweep", lambda: pages.paged_sweep(model, idx))
print(json.dumps({k: v for k, v in res.items() if k not in ("sweep", "rows")})[:3000])
for r in res.get("rows", []):
    print(r["name"], r["step_us"], r["kernels"], r["setup_s"])
