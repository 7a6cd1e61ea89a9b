"""Issue 27: what the rule "splits fixed by the batch" costs the step at short rows. The paged
fused step (pages.replayed, compile=True) captured with fewer splits than kernels.split_count
gives, as a second graph for short rows would run it, against the package's, in one process:

- 'batch_1', 'batch_8': the step replayed alone at the bench's positions (32 on), interleaved
  (peers.measure, 5 repeats): the package (64 splits at 1 row, 16 at 8) and fixed counts.
- 'sweep_1', 'sweep_8': each form's step against position, bins of 16 steps, 32 to 1023.
- 'logits': each form's first step's logits against the package's, largest difference.
Nothing in the package changes: kernels.split_count is replaced in this process only.
"""

import json
import sys
import time
import traceback

import torch

from tinyllm import kernels as K, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path = sys.argv[1]
t0 = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 proto86/probe86.py OUT.json")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)  # noqa: E731
RULE = K.split_count
# the splits are part of rope_write_splits' output shape: Inductor's caches would hand a form
# the code compiled for another (kernels.step_splits), so none is used
torch._inductor.config.fx_graph_cache = False
torch._functorch.config.enable_autograd_cache = False
FORMS = {1: [None, 16, 8, 4], 8: [None, 8, 4, 2]}


def with_splits(n):
    K.split_count = RULE if n is None else (lambda B, H_kv, device: n)
    torch._dynamo.reset()


def name(n):
    return "package" if n is None else f"{n} splits"


model = load_pretrained("cuda")
n_pos = model.cfg.max_seq_len - 32
for batch, forms in FORMS.items():
    idx = prompt_batch(batch, 32, "cuda")
    try:
        built = []
        for n in forms:
            with_splits(n)
            built.append(pages.replayed(model, idx, name(n), kv="paged", compile=True))
        with_splits(None)
        res[f"package_splits_{batch}"] = RULE(batch, 4, "cuda")
        logits = {}
        for v in built:
            v.reset()
            logits[v.name] = v.step(v.tok).float().clone()
        res.setdefault("logits", {})[f"batch {batch}"] = {
            k: (x - logits["package"]).abs().max().item() for k, x in logits.items()}
        rows = peers.measure(built, repeats=5)
        for r in rows:
            print(batch, f"{r['name']:10s}", r["step_us"], r["kernels"], "kernels", flush=True)
        res[f"batch_{batch}"] = rows
    except Exception:  # noqa: BLE001
        res[f"error batch {batch}"] = traceback.format_exc()[-2500:]
        print(res[f"error batch {batch}"], flush=True)
    save()
    sweep = {"positions": list(range(32, 32 + n_pos, 16)), "bin_size": 16}
    for n in forms:
        try:
            with_splits(n)
            v = pages.replayed(model, idx, name(n), kv="paged", compile=True, room=n_pos)
            sweep[f"{name(n)}_us"] = [round(t, 1) for t in peers.position_sweep(v, n_pos, per=16)]
            print("sweep", batch, name(n), sweep[f"{name(n)}_us"][:4], sweep[f"{name(n)}_us"][-2:],
                  flush=True)  # fmt: skip
        except Exception:  # noqa: BLE001
            res[f"error sweep {batch} {n}"] = traceback.format_exc()[-2500:]
            print(res[f"error sweep {batch} {n}"], flush=True)
    res[f"sweep_{batch}"] = sweep
    save()
with_splits(None)
res["seconds"] = round(time.time() - t0, 1)
save()
print("done in", res["seconds"], "s", flush=True)
