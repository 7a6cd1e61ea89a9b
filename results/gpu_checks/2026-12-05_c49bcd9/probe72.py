"""Issue 27, stop 50, call A, part 2: the paged fused step with the package's kernel now (sums
or tensor cores chosen a row at a time, on the device) against before (0abd23e), in one
process: replayed alone at batch 1, 2, 4, 8, 32 and 256 (medians of 5, interleaved, positions
32+); against position at batch 4 and 8; greedy tokens against before's; replay against eager.
With a third argument, now alone with kernels.STEP_SHARES = 16, set before anything is
compiled (a compiled step keeps the shares it saw, so a process of its own)."""

import collections
import json
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
shares16 = len(sys.argv) > 3
t_start = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe72.py " + " ".join(sys.argv[1:]))}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)

sys.path.insert(0, ".final")
import before  # noqa: E402

NOW = kernels.triton_rope_write_attend

if shares16:
    kernels.STEP_SHARES = 16
    VARIANTS = {"now, 16 shares": NOW}
    BATCHES, SWEEPS, EXACT = (1, 2, 4), (1,), (1, 4)
else:
    VARIANTS = {"before (0abd23e)": before.load_before().triton_rope_write_attend, "now": NOW}
    BATCHES, SWEEPS, EXACT = (1, 2, 4, 8, 32, 256), (8, 4), (1, 4, 8)
ALL = list(VARIANTS)


def setting(name):
    kernels.triton_rope_write_attend = VARIANTS[name]
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


model = load_pretrained("cuda")
for batch in BATCHES:
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
        print("step", batch, f"{r['name']:24s}", r["step_us"]["median"], "us", r["step_us"], r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()
    del built

n = model.cfg.max_seq_len - 32
for batch in SWEEPS:
    for name in ALL:
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
        print("sweep", batch, f"{name:24s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        save()
base = {}
for name in ALL:
    setting(name)
    for batch in (1, 8):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        res.setdefault("tokens", {})[f"{name}, batch {batch}"] = toks.tolist()
        if batch not in base:
            base[batch] = toks
        same = toks == base[batch]
        res.setdefault("greedy_vs_before", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    save()
setting(ALL[-1])
try:
    res["exactness"] = pages.paged_exactness(model, batches=EXACT)
except Exception:  # noqa: BLE001
    res["exactness"] = traceback.format_exc()[-2500:]
e = res["exactness"]
print("exact", ALL[-1], e if isinstance(e, str) else (e["all_equal"], e["steps"], e.get("batches")), flush=True)
print("tokens", json.dumps(res.get("greedy_vs_before")), flush=True)
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
