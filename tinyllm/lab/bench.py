"""The measurements behind results/: python -m tinyllm.lab.bench (a benchmark, not a test).

    python -m tinyllm.lab.bench                  # on a GPU: writes results/<gpu>.json and a trace
    python -m tinyllm.lab.bench --quick          # fewer batch sizes and steps, for a first look

Operating point: the shipped model, a 32-token prompt, 256 decode steps; each step timed
with CUDA events after warm-up, medians reported. Three ways to run the same decode step:

- eager:  generation.decode_step with the dynamic KVCache (what generate() does);
- static: GraphDecoder(use_graph=False), the fixed-shape step run eagerly;
- graph:  GraphDecoder(use_graph=True), the same step replayed from a CUDA graph.

The two comparisons of notebook 05 live here too (compare_replay, compare_eager_static),
so a CPU can run them live: they need no GPU, only a model.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from tinyllm import Engine, GraphDecoder, KVCache, Tokenizer, autocast, load_pretrained
from tinyllm.generation import ATTENTION_BACKENDS, decode_step, left_pad, prefill
from tinyllm.graphs import FUSED_COMPILE
from tinyllm.lab.exactness import compare_eager_static, compare_replay
from tinyllm.lab.timing import (
    copy_bandwidth_GBps,
    kernel_summary,
    pool_bytes,
    profile_steps,
    time_steps,
)

RESULTS = Path(__file__).resolve().parents[2] / "results"
PROMPT = "The for statement is used to iterate over the elements of a sequence"


def prompt_batch(batch: int, prompt_len: int, device) -> torch.Tensor:
    ids = Tokenizer().encode(PROMPT * (1 + prompt_len // len(PROMPT)))[:prompt_len]
    return torch.tensor([ids] * batch, device=device)


def gpu_slug(name: str) -> str:
    return name.lower().replace("nvidia", "").strip().replace(" ", "_")


def provenance(command: str, commit: str | None) -> dict:
    if commit is None:
        try:
            commit = (
                subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"],
                    capture_output=True,
                    text=True,
                    cwd=Path(__file__).parent,
                ).stdout.strip()
                or None
            )
        except OSError:
            commit = None
    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "command": command,
    }


# --- the three step functions, each after its own prefill --------------------------------


def make_step(model, mode: str, idx: torch.Tensor):
    """Prefill idx and return step(tok) -> logits for mode eager / static / graph."""
    if mode == "eager":
        cache = KVCache(model.cfg.n_layers)
        prefill(model, idx, cache)
        return lambda tok: decode_step(model, cache, tok, check=False)
    decoder = GraphDecoder(model, idx.shape[0], use_graph=mode == "graph")
    decoder.prefill(idx)
    if mode == "graph":
        decoder.capture()
    return partial(decoder.step, check=False)  # as generate() runs it: no id re-check


# --- the GPU measurements ------------------------------------------------------------------


def measure_capture(model, idx) -> dict:
    out = {"batch": idx.shape[0], "windows": [], "capture_s": [], "pool_bytes": []}
    buckets = GraphDecoder(model, idx.shape[0]).buckets
    for w in buckets:  # each window alone, in a fresh pool of its own
        d = GraphDecoder(model, idx.shape[0])
        d.prefill(idx)
        out["windows"].append(w)
        out["capture_s"].append(round(d.capture((w,)), 4))
        out["pool_bytes"].append(pool_bytes(d.pool))
        del d
    d = GraphDecoder(model, idx.shape[0])
    d.prefill(idx)
    out["total_capture_s"] = round(d.capture(), 4)
    out["shared_pool_bytes"] = pool_bytes(d.pool)
    out["separate_pools_bytes"] = sum(out["pool_bytes"])
    return out


def measure_engine(model, n_slots: int, n_requests: int, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    text = Tokenizer().encode(PROMPT * 10)
    lens = torch.randint(8, 65, (n_requests,), generator=gen).tolist()
    news = torch.randint(32, 257, (n_requests,), generator=gen).tolist()
    out = {
        "n_slots": n_slots,
        "n_requests": n_requests,
        "prompt_lens": [min(lens), max(lens)],
        "max_new_tokens": [min(news), max(news)],
        "n_tokens": sum(news),
    }
    for mode in ("eager", "graph"):
        engine = Engine(model, n_slots, max_len=512, use_graph=mode == "graph")
        if mode == "graph":
            engine.decoder.capture()
        for L, n in zip(lens, news):
            engine.submit(text[:L], n)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = engine.run()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        assert sum(len(v) for v in done.values()) == sum(news)
        out[f"{mode}_s"] = round(seconds, 3)
        out[f"{mode}_tok_s"] = round(sum(news) / seconds, 1)
    out["speedup"] = round(out["graph_tok_s"] / out["eager_tok_s"], 2)
    return out


def compiled_static_step(model, idx, mode: str, buckets=None, static_addresses=False):
    """A static-cache step through torch.compile(model, mode=...) as a user first writes it
    (no fullgraph, dynamic shapes allowed): `buckets` None is the project's default buckets,
    (max_len,) one window of max_len keys. static_addresses marks the cache tensors as
    fixed, as module buffers are."""
    compile_args = {"mode": mode, "dynamic": None, "fullgraph": False}
    decoder = GraphDecoder(
        model, idx.shape[0], buckets=buckets, use_graph=False, fused=compile_args
    )
    decoder.prefill(idx)
    if static_addresses:
        c = decoder.cache
        for t in c.k + c.v + [c.pos, c.first_valid, decoder.tok]:
            torch._dynamo.mark_static_address(t)
    return partial(decoder.step, check=False)


def eager_step_with_backends(model, idx, attention_backends):
    """Eager decode (prefill, then the dynamic cache's step) with SDPA limited to
    attention_backends instead of generation.ATTENTION_BACKENDS."""
    cache = KVCache(model.cfg.n_layers)

    @torch.no_grad()
    def run(tokens):
        with autocast(idx.device, attention_backends=attention_backends):
            return model(tokens, cache=cache)[0]

    run(idx)
    return run


def measure_fusion(model, batch: int = 1, n_steps: int = 64) -> dict:
    """Eager, GraphDecoder's graphs of unfused kernels, torch.compile's reduce-overhead (as
    a user first tries it, and gpt-fast style), and fused kernels in the project's bucketed
    graphs: same model, same batch, positions 32 to about 136 (one bucket), in one run."""
    from torch._dynamo.utils import counters

    idx = prompt_batch(batch, 32, "cuda")
    tok = idx[:, -1:].clone()
    max_len = model.cfg.max_seq_len

    def fused_graphs():
        d = GraphDecoder(model, batch, fused=True)
        d.prefill(idx)
        d.capture()
        return partial(d.step, check=False)

    def fused_eager():
        d = GraphDecoder(model, batch, fused=True, use_graph=False)
        d.prefill(idx)
        return partial(d.step, check=False)

    variants = {
        "eager": lambda: make_step(model, "eager", idx),
        "graph (unfused kernels, bucketed)": lambda: make_step(model, "graph", idx),
        "reduce-overhead, project cache": lambda: compiled_static_step(
            model, idx, "reduce-overhead"
        ),
        "reduce-overhead, gpt-fast style": lambda: compiled_static_step(
            model, idx, "reduce-overhead", buckets=(max_len,), static_addresses=True
        ),
        "fused kernels, no graph": fused_eager,
        "fused kernels in bucketed graphs": fused_graphs,
    }
    rows = []
    for name, setup in variants.items():
        torch._dynamo.reset()
        counters.clear()
        with torch.no_grad():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            t0 = time.perf_counter()
            step = setup()
            for _ in range(3):  # compiles, and reduce-overhead records its graph on call 2-3
                step(tok)
            torch.cuda.synchronize()
            setup_s = time.perf_counter() - t0
            t = time_steps(step, tok, n_steps, warmup=4, n_cpu=8)
            kernels = kernel_summary(profile_steps(step, tok))
            peak = torch.cuda.max_memory_allocated() - base
        skips = sum(v for k, v in counters.get("inductor", {}).items() if "cudagraph_skip" in k)
        rows.append(
            {
                "name": name,
                "step_us": round(t["step_us"], 1),
                "cpu_us": round(t["cpu_us"], 1),
                "setup_s": round(setup_s, 2),
                "peak_memory_bytes": peak,
                "kernels": kernels["kernels"],
                "kernel_us": round(kernels["kernel_us"], 1),
                "cudagraph_skips": skips,
            }
        )
        print("fusion", rows[-1], flush=True)
    by = {r["name"]: r for r in rows}
    return {
        "batch": batch,
        "positions": [32, 32 + n_steps + 40],
        "rows": rows,
        "fused_over_gptfast": round(
            by["fused kernels in bucketed graphs"]["step_us"]
            / by["reduce-overhead, gpt-fast style"]["step_us"],
            3,
        ),
        "compile": FUSED_COMPILE,
    }


def run(
    quick: bool, out_path: Path | None, trace_path: Path | None, command: str, commit: str | None
) -> dict:
    if not torch.cuda.is_available():
        raise SystemExit(
            "tinyllm.lab.bench measures a GPU and this machine has none; the "
            "notebooks show the recorded results from results/ instead"
        )
    model = load_pretrained("cuda")
    prompt_len, n_steps = 32, (64 if quick else 256)
    batches = [1, 8, 64] if quick else [1, 2, 4, 8, 16, 32, 64]
    res = {
        "provenance": provenance(command, commit),
        "operating_point": {
            "model": "tiny",
            "n_params": model.n_params(),
            "prompt_len": prompt_len,
            "decode_steps": n_steps,
            "max_len": model.cfg.max_seq_len,
            "buckets": list(GraphDecoder(model, 1).buckets),
            "dtype": "bfloat16 autocast",
            "timing": "median over the decode steps after 16 warm-up steps, "
            "each timed with CUDA events; the step as generate() "
            "runs it, sampling excluded",
        },
    }
    modes = ("eager", "static", "graph")
    step_time = {"batch": batches, **{f"{m}_us": [] for m in modes}}
    cpu_time = {"batch": batches, **{f"{m}_us": [] for m in modes}}
    kernel_time = {"batch": batches, **{f"{m}_us": [] for m in modes}}
    traces, kernels = {}, {}
    for B in batches:
        idx = prompt_batch(B, prompt_len, "cuda")
        tok = idx[:, -1:].clone()
        traces[str(B)] = {}
        for mode in modes:
            t = time_steps(make_step(model, mode, idx), tok, n_steps)
            trace = profile_steps(make_step(model, mode, idx), tok)
            k = kernel_summary(trace)
            step_time[f"{mode}_us"].append(round(t["step_us"], 1))
            cpu_time[f"{mode}_us"].append(round(t["cpu_us"], 1))
            kernel_time[f"{mode}_us"].append(round(k["kernel_us"], 1))
            if B == 1:
                kernels[mode] = k["kernels"]
            if mode != "static":
                traces[str(B)][mode] = [e for e in trace if e["step"] < 2]
            print(
                f"batch {B:3d} {mode:6s} step {t['step_us']:8.1f} us  cpu {t['cpu_us']:8.1f} us"
                f"  kernels {k['kernels']:4.0f} ({k['kernel_us']:.1f} us)",
                flush=True,
            )
    # the same eager step with cuDNN attention allowed: a new plan for every key length
    idx = prompt_batch(1, prompt_len, "cuda")
    cudnn = [*ATTENTION_BACKENDS, SDPBackend.CUDNN_ATTENTION]
    t = time_steps(
        eager_step_with_backends(model, idx, cudnn), idx[:, -1:].clone(), min(n_steps, 64), warmup=4
    )
    res["eager_with_cudnn_attention"] = {"batch": 1, "step_us": round(t["step_us"], 1)}
    print("eager with cuDNN attention", res["eager_with_cudnn_attention"], flush=True)
    step_time["speedup"] = [
        round(e / g, 2) for e, g in zip(step_time["eager_us"], step_time["graph_us"])
    ]
    res["step_time"], res["cpu_time"], res["gpu_kernel_time"] = step_time, cpu_time, kernel_time
    res["kernels_per_step"] = kernels
    res["graph_busy_fraction"] = {
        "batch": batches,
        "fraction": [
            round(k / s, 3) for k, s in zip(kernel_time["graph_us"], step_time["graph_us"])
        ],
    }
    weight_bytes = model.n_params() * 2
    bw = copy_bandwidth_GBps()
    res["bandwidth"] = {
        "weight_bytes": weight_bytes,
        "copy_GBps": round(bw, 1),
        "floor_us": round(weight_bytes / (bw * 1e9) * 1e6, 2),
    }
    idx1 = prompt_batch(1, prompt_len, "cuda")
    res["capture"] = measure_capture(model, idx1)
    print("capture", res["capture"], flush=True)
    idx4, pads = left_pad(
        [Tokenizer().encode(PROMPT)[:n] for n in (32, 20, 9, 27)], Tokenizer().pad_id, "cuda"
    )
    steps = model.cfg.max_seq_len - idx4.shape[1]
    res["bit_exact"] = compare_replay(
        model, idx4, 64 if quick else steps, pad_lens=pads, check_reference=True
    )
    print("bit_exact", {k: v for k, v in res["bit_exact"].items()}, flush=True)
    cmp = compare_eager_static(model, prompt_batch(8, prompt_len, "cuda"), n_steps)
    res["eager_vs_static"] = cmp
    print(
        "eager_vs_static",
        {k: v for k, v in cmp.items() if k != "max_logit_diff_per_step"},
        flush=True,
    )
    res["engine"] = measure_engine(model, 32, 64 if quick else 256)
    print("engine", res["engine"], flush=True)
    try:
        res["fusion"] = measure_fusion(model)
    except Exception as e:  # report what a user would meet, do not hide it
        res["fusion"] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
    if out_path is None:  # never overwrite a recording (results/h200.json ships with the course)
        out_path = RESULTS / f"{gpu_slug(res['provenance']['gpu'])}.json"
        if out_path.exists():
            out_path = out_path.with_name(f"{out_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    trace_path = trace_path or RESULTS / "traces" / out_path.name
    out_path.parent.mkdir(parents=True, exist_ok=True)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(res, indent=1))
    trace_path.write_text(json.dumps({"provenance": res["provenance"], "batch": traces}))
    print(f"wrote {out_path} and {trace_path}")
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="batches 1, 8, 64 and 64 steps")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: results/<gpu>.json, or results/<gpu>-<date-time>.json if that exists",
    )
    p.add_argument(
        "--trace-out",
        type=Path,
        default=None,
        help="default: results/traces/ with the same file name",
    )
    p.add_argument(
        "--commit",
        default=os.environ.get("TINYLLM_COMMIT"),
        help="git commit to record (default: git rev-parse HEAD)",
    )
    args = p.parse_args(argv)
    command = "python -m tinyllm.lab.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    run(args.quick, args.out, args.trace_out, command.strip(), args.commit)


if __name__ == "__main__":
    main()
