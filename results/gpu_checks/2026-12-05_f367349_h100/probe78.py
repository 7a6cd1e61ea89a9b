"""Issue 27: in probe77 (one process a rule) the paged fused step at one row read 37.32 µs at
positions 36-83 with 64 shares of 4 warps, against 38.49-38.50 with the package's 2 warps (two
processes). Here both in one process: at 1 and 8 rows, the step captured with the fused
kernel's warps at 2 (the package's) and at 4 (pages.replayed, compile=True; the launch's warps
read when the graph is captured), timed in turns, 5 rounds each, 48 steps with an event every
16 at positions 36-83 and 964-1011 (a prompt of 32); and each graph's logits after 64 steps
against the other's (the same kernels but the attention's warps)."""

import json
import statistics
import sys

import torch

from tinyllm import kernels as K, load_pretrained
from tinyllm.lab import bench, pages
from tinyllm.lab.prompts import prompt_batch
from tinyllm.lab.timing import step_times

out_path = sys.argv[1]
res = {"provenance": bench.provenance("python3 .final/probe78.py OUT.json"), "steps": {}}
own_launch, warps = K.triton_rope_write_attend, {"n": K.NUM_WARPS}


def launch(*args, num_warps=None, **kwargs):
    return own_launch(*args, num_warps=warps["n"], **kwargs)


K.triton_rope_write_attend = launch
model = load_pretrained("cuda")


def timed(v):
    v.reset()
    short = statistics.median(step_times(v.step, v.tok, 48, 4, 16))
    for _ in range(880):
        v.step(v.tok)
    return round(short, 2), round(statistics.median(step_times(v.step, v.tok, 48, 0, 16)), 2)


for B in (1, 8):
    vs = {}
    for w in (2, 4):
        warps["n"] = w
        vs[w] = pages.replayed(model, prompt_batch(B, 32, "cuda"), f"batch {B}, {w} warps",
                               kv="paged", compile=True, room=992)
    warps["n"] = K.NUM_WARPS
    logits = {}
    for w, v in vs.items():
        v.reset()
        for _ in range(64):
            out = v.step(v.tok)
        logits[w] = (out[0] if isinstance(out, tuple) else out).float().clone()
    got = {w: {"short": [], "long": []} for w in vs}
    timed(vs[2]), timed(vs[4])  # a first pass each, unrecorded
    for _ in range(5):
        for w, v in vs.items():
            s, l = timed(v)
            got[w]["short"].append(s)
            got[w]["long"].append(l)
    res["steps"][str(B)] = {
        f"{w} warps": {"positions 36-83": g["short"], "positions 964-1011": g["long"],
                       "short_us": statistics.median(g["short"]),
                       "long_us": statistics.median(g["long"])} for w, g in got.items()}
    res["steps"][str(B)]["logits_max_diff_after_64_steps"] = float(
        (logits[2] - logits[4]).abs().max())
    print(f"batch {B}:", {w: (statistics.median(g['short']), statistics.median(g['long']))
                          for w, g in got.items()},
          "logits max diff", res["steps"][str(B)]["logits_max_diff_after_64_steps"], flush=True)
    json.dump(res, open(out_path, "w"), indent=1)
