"""Measure the kernel diet, stage by stage, on a GPU: results/h200_diet.json.

Each stage of the diet is a commit of tinyllm. This script measures one of them, imported
from a folder that holds that commit's tinyllm/ (git archive COMMIT tinyllm), with the
weights file of its layout, and appends one JSON line: for batch 1 and 8, the eager decode
step (dynamic KVCache), the static step run eagerly and its graph replay, each the median
(and min–max) over repeats of 40 steps back to back after a fresh prefill of a 32-token
prompt (positions 32-75: window 128), and the kernels per step from torch.profiler.

    PYTHONPATH=STAGE_DIR python tools/diet_stages.py NAME COMMIT WEIGHTS OUT.jsonl
    python tools/diet_stages.py --collect OUT.jsonl results/h200_diet.json COMMAND

Only the stage's public API is used (load, GraphDecoder, prefill, decode_step, and
lab.timing's profile_steps and kernel_summary), which every stage has.
"""

import json
import platform
import statistics
import sys
import time

import torch

PROMPT = "The for statement is used to iterate over the elements of a sequence"
STAGES = {  # what each stage of the diet changed, by the name it is measured under
    "s0": "before the diet: fp32 weights under bf16 autocast, a boolean mask with enable_gqa "
    "(SDPA's MATH path), separate q/k/v and gate/up GEMMs, RoPE through fp32",
    "s1": "query heads folded into the query axis and an additive mask built once per step: "
    "SDPA's fused memory-efficient kernel",
    "s2": "parameters in the compute dtype (bf16): no weight casts, no fp32 norms",
    "s3": "one GEMM for q, k and v, one for gate and up",
    "s4": "RoPE on queries and keys together, in bf16, over tables widened once per step",
    "s5": "the mask kept on the device and one key opened per step; each K/V head and its "
    "query heads folded into a batch row",
}
REPEATS, STEPS, WARMUP = 5, 40, 4


def step_times(step, tok, n):  # lab.timing.step_times, which stages s0-s4 do not have
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    for _ in range(WARMUP):
        step(tok)
    torch.cuda.synchronize()
    ev[0].record()
    for i in range(n):
        step(tok)
        ev[i + 1].record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) * 1e3 for a, b in zip(ev, ev[1:])]


def measure_batch(model, idx):
    from tinyllm import GraphDecoder, KVCache
    from tinyllm.generation import decode_step, prefill
    from tinyllm.lab.timing import kernel_summary, profile_steps

    B, tok, state = idx.shape[0], idx[:, -1:].clone(), {}

    def eager_reset():
        state["cache"] = KVCache(model.cfg.n_layers)
        prefill(model, idx, state["cache"])

    static = GraphDecoder(model, B, use_graph=False)
    graph = GraphDecoder(model, B)
    graph.prefill(idx)
    graph.capture()
    modes = {
        "eager": (eager_reset, lambda t: decode_step(model, state["cache"], t, check=False)),
        "static": (lambda: static.prefill(idx), lambda t: static.step(t, check=False)),
        "graph": (lambda: graph.prefill(idx), lambda t: graph.step(t, check=False)),
    }
    times = {m: [] for m in modes}
    for _ in range(REPEATS):  # interleaved
        for m, (reset, step) in modes.items():
            reset()
            times[m].append(statistics.median(step_times(step, tok, STEPS)))
    row = {}
    for m, (reset, step) in modes.items():
        reset()
        k = kernel_summary(profile_steps(step, tok))
        t = times[m]
        row[m] = {
            "step_us": {
                "median": round(statistics.median(t), 1),
                "min": round(min(t), 1),
                "max": round(max(t), 1),
                "n": len(t),
            },
            "kernels": k["kernels"],
            "kernel_us": round(k["kernel_us"], 1),
        }
    return row


def measure(name, commit, weights):
    import tinyllm
    from tinyllm import Tokenizer

    model = tinyllm.load(weights, device="cuda")
    ids = Tokenizer().encode(PROMPT * 2)[:32]
    out = {
        "stage": name,
        "commit": commit,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "param_dtype": str(next(model.parameters()).dtype),
        "batch": {},
    }
    for B in (1, 8):
        row = measure_batch(model, torch.tensor([ids] * B, device="cuda"))
        out["batch"][str(B)] = row
        print(name, B, {m: (r["step_us"]["median"], r["kernels"]) for m, r in row.items()})
    return out


def collect(jsonl, out_path, command):
    """Every measured stage (one JSON line each, with its own gpu, torch and date) into one
    file, with what each stage changed."""
    stages = [json.loads(line) for line in open(jsonl)]
    for stage in stages:
        stage["what"] = STAGES.get(stage["stage"], "")
    res = {
        "provenance": {
            "gpu": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
        },
        "operating_point": {
            "prompt_len": 32,
            "positions": [32, 32 + WARMUP + STEPS - 1],
            "window": 128,
            "repeats": REPEATS,
            "steps_per_repeat": STEPS,
            "timing": "median over each repeat's steps (CUDA events, back "
            "to back, after a fresh prefill); median and min-max "
            "over the repeats, interleaved",
        },
        "stages": stages,
    }
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--collect":
        collect(*sys.argv[2:5])
    else:
        name, commit, weights, out = sys.argv[1:5]
        row = measure(name, commit, weights)
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
