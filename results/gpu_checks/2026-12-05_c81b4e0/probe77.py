"""Issue 27: the paged fused step (compile=True, pages.replayed as the bench builds it) at 1 and
8 rows, at positions 36-83 and 964-1011 (a prompt of 32, four steps of warm-up, 48 timed; then 880 more) (an event every 16 steps, 48 steps, the median of 5
rounds), under a launch rule of the fused op given in argv[2] as JSON {batch: [shares, warps]}
("{}" is the package's own). Each rule runs in its own process with its own Inductor cache:
the shares are part of a compiled step's shapes (kernels.step_shares)."""

import json
import statistics
import sys

import torch

from tinyllm import kernels as K, load_pretrained
from tinyllm.lab import bench, pages
from tinyllm.lab.prompts import prompt_batch
from tinyllm.lab.timing import step_times

out_path, rule = sys.argv[1], {int(b): v for b, v in json.loads(sys.argv[2]).items()}
res = {"provenance": bench.provenance(f"python3 .final/probe77.py OUT.json '{sys.argv[2]}'"),
       "rule": {str(b): v for b, v in rule.items()}}
own_count, own_launch = K.split_count, K.triton_rope_write_attend


def split_count(B, H_kv, device):
    return rule[B][0] if B in rule else own_count(B, H_kv, device)


def launch(qkv, *args, kernels=None, n_splits=None, num_warps=K.NUM_WARPS, shares=False):
    B = qkv.shape[0]
    if B in rule:
        n_splits, num_warps = n_splits or rule[B][0], rule[B][1]
    return own_launch(qkv, *args, kernels=kernels, n_splits=n_splits, num_warps=num_warps,
                      shares=shares)


K.split_count, K.triton_rope_write_attend = split_count, launch
res["shares"] = {str(B): K.step_shares(B, 4, torch.device("cuda")) for B in (1, 8)}
model = load_pretrained("cuda")
res["steps"] = {}
for B in (1, 8):
    v = pages.replayed(model, prompt_batch(B, 32, "cuda"), f"batch {B}", kv="paged",
                       compile=True, room=992)
    v.reset()
    step_times(v.step, v.tok, 48, warmup=4, per=16)  # a first pass, unrecorded
    rounds_s, rounds_l = [], []
    for _ in range(5):
        v.reset()
        rounds_s.append(round(statistics.median(step_times(v.step, v.tok, 48, 4, 16)), 2))
        for _ in range(880):
            v.step(v.tok)
        rounds_l.append(round(statistics.median(step_times(v.step, v.tok, 48, 0, 16)), 2))
    s, l = statistics.median(rounds_s), statistics.median(rounds_l)
    res["steps"][str(B)] = {"positions 36-83": rounds_s, "positions 964-1011": rounds_l,
                            "short_us": s, "long_us": l, "long_over_short": round(l / s, 3)}
    print(f"batch {B}: step {s} µs at 36-83, {l} at 964-1011, {l / s:.3f}x", flush=True)
    json.dump(res, open(out_path, "w"), indent=1)
