"""Issue 27, stop 44, call C: batch 8 against position with the package's fused kernel (16
shares, tensor cores 2 blocks a step, loads 3 steps ahead, 2 warps) and other forms, in one
process each share count: argv[3] the shares at batch 8 (split_count patched before anything
compiles). In the process: the step at batch 8 replayed alone (medians of 5, interleaved), the
step against position, and the op alone at batch 8, 128 and 1024 keys."""

import collections
import functools
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, shares8 = sys.argv[1], int(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe56.py OUT.json {shares8}"), "shares_at_batch_8": shares8}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)
ORIG_COUNT = kernels.split_count
kernels.split_count = lambda B, H_kv, device: shares8 if B == 8 else ORIG_COUNT(B, H_kv, device)
ORIG = kernels.triton_rope_write_attend


class Bound:
    def __init__(self, kern, **extra):
        self.kern, self.extra = kern, extra

    def __getitem__(self, grid):
        return lambda *a, **k: self.kern[grid](*a, **{**k, **self.extra})


VARIANTS = {  # name: (CHUNK, STAGES, warps) with tensor cores, or None for the package's
    "package": None,
    "chunk 4, 2 warps": (4, 1, 2),
    "chunk 4, 4 warps": (4, 1, 4),
}


def launcher(name):
    v = VARIANTS[name]
    if v is None:
        return ORIG
    chunk, stages, warps = v
    return functools.partial(ORIG, kernels=(Bound(kernels.fused_kernel, CHUNK=chunk, STAGES=stages, num_warps=warps),
                                            kernels.combine_kernel))


def setting(name):
    kernels.triton_rope_write_attend = launcher(name)
    torch._dynamo.reset()


model = load_pretrained("cuda")
idx = prompt_batch(8, 32, "cuda")
built = []
for name in VARIANTS:
    setting(name)
    built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
rows = peers.measure(built, repeats=5, keep_trace=False)
for r in rows:
    print(shares8, "step", f"{r['name']:20s}", r["step_us"], r["kernels"], flush=True)
res["batch_8"] = rows
save()
del built
n = model.cfg.max_seq_len - 32
for name in VARIANTS:
    setting(name)
    v = pages.replayed(model, prompt_batch(8, 32, "cuda"), name, kv="paged", compile=True, room=n)
    times = peers.position_sweep(v, n, per=16)
    sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16, "paged fused_us": [round(t, 1) for t in times]}
    sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
    res.setdefault("sweep_8", {})[name] = sweep
    print(shares8, "sweep", f"{name:20s}", sweep["paged fused_us"][1:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
    save()
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done", res["seconds"])
