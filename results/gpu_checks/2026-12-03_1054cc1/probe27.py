"""Issue 27, first call: the paged step with kernels.rope_write_attend in it (RoPE, the K/V
write and the attention in one op a layer). Every step on equal footing (lab.pages, an ideal
host) at batch 1 and 8, with the kernels of one step by name; the paged steps against
position; replay against the eager paged step, bit for bit. Into OUT.json."""

import collections
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
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe27.py OUT.json")}


def save():
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


def part(name, fn):
    t0 = time.time()
    try:
        res[name] = fn()
    except Exception:  # noqa: BLE001
        res[name + "_error"] = traceback.format_exc()[-3000:]
        print(res[name + "_error"], flush=True)
    res.setdefault("seconds", {})[name] = round(time.time() - t0, 1)
    print(name, res["seconds"][name], "error" if name + "_error" in res else "ok", flush=True)
    save()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


def rows_at(batch):
    idx = prompt_batch(batch, 32, "cuda")
    torch._dynamo.reset()
    rows = peers.measure(pages.equal_footing(model, idx, extra), repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
    return rows


def sweep_at(batch):
    idx = prompt_batch(batch, 32, "cuda")
    s = pages.paged_sweep(model, idx)
    return {"sweep": s, "long_over_short": {n: pages.long_over_short(s, n, long_from=960)
                                            for n in ("paged", "paged fused")}}


model = load_pretrained("cuda")
extra = {k: v for k, v in COURSE_COMPILE["options"].items() if k not in gptfast.GENERATE_PY_INDUCTOR}
part("exactness", lambda: pages.paged_exactness(model))
part("rows_1", lambda: rows_at(1))
part("rows_8", lambda: rows_at(8))
part("sweep_1", lambda: sweep_at(1))
part("sweep_8", lambda: sweep_at(8))
for b in ("rows_1", "rows_8"):
    for r in res.get(b, []):
        print(b, r["name"], r["step_us"]["median"], r["kernels"], r["kernel_us"], r["setup_s"])
        if "paged" in r["name"]:
            print("   ", r["kernel_names"])
print({k: v.get("long_over_short") for k, v in res.items() if k.startswith("sweep_") and isinstance(v, dict)})
print(json.dumps(res.get("exactness"))[:1500])
