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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from tinyllm.checkpoint import load_pretrained
from tinyllm.engine import Engine
from tinyllm.generation import decode_step, left_pad, prefill
from tinyllm.graphs import FUSED_COMPILE, GraphDecoder
from tinyllm.kv_cache import KVCache
from tinyllm.tokenizer import Tokenizer

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
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=Path(__file__).parent).stdout.strip() or None
        except OSError:
            commit = None
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "commit": commit, "command": command}


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
    return decoder._step  # as generate() runs it: its own tokens need no re-check


def time_steps(step, tok: torch.Tensor, n_steps: int, warmup: int = 16, n_cpu: int = 64) -> dict:
    """Median step time of n_steps decode steps run back to back, as a decode loop runs
    them: a CUDA event between consecutive steps, so each interval is whichever is slower,
    the CPU issuing the step or the GPU running it. cpu_us: median host time to issue one
    step, measured separately with the GPU idle before each step."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps + 1)]
    for _ in range(warmup):
        step(tok)
    torch.cuda.synchronize()
    events[0].record()
    for i in range(n_steps):
        step(tok)
        events[i + 1].record()
    torch.cuda.synchronize()
    gpu = [a.elapsed_time(b) * 1e3 for a, b in zip(events, events[1:])]
    cpu = []
    for _ in range(n_cpu):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(tok)
        cpu.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return {"step_us": statistics.median(gpu), "cpu_us": statistics.median(cpu)}


def profile_steps(step, tok: torch.Tensor, n_steps: int = 3) -> list[dict]:
    """Kernels and launch calls of n_steps consecutive steps, from torch.profiler's trace."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(3):
        step(tok)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(n_steps):
            with record_function(f"decode_step_{i}"):
                step(tok)
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        prof.export_chrome_trace(f"{tmp}/trace.json")
        events = json.loads(Path(f"{tmp}/trace.json").read_text())["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].rsplit("_", 1)[1]))
                   for e in events if e.get("name", "").startswith("decode_step_")
                   and e.get("cat") == "user_annotation")
    launch_ts = {}
    out = []
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            if "Launch" in e["name"] or "Memcpy" in e["name"] or "Memset" in e["name"]:
                launch_ts[e["args"]["correlation"]] = e["ts"]
                out.append({"name": e["name"], "start": e["ts"], "dur": e["dur"], "kind": "cpu",
                            "corr": e["args"]["correlation"]})
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            out.append({"name": e["name"][:60], "start": e["ts"], "dur": e["dur"], "kind": "gpu",
                        "corr": e.get("args", {}).get("correlation")})
    trace = []
    for ev in out:
        t = ev["start"] if ev["kind"] == "cpu" else launch_ts.get(ev["corr"])
        owner = next((s for lo, hi, s in steps if t is not None and lo <= t <= hi), None)
        if owner is not None:
            trace.append({"step": owner, "name": ev["name"], "start_us": ev["start"],
                          "dur_us": ev["dur"], "kind": ev["kind"]})
    t0 = min((e["start_us"] for e in trace), default=0)
    for e in trace:
        e["start_us"] = round(e["start_us"] - t0, 3)
        e["dur_us"] = round(e["dur_us"], 3)
    return sorted(trace, key=lambda e: e["start_us"])


def kernel_summary(trace: list[dict]) -> dict:
    steps = sorted({e["step"] for e in trace})
    per_step = [[e for e in trace if e["step"] == s and e["kind"] == "gpu"] for s in steps]
    return {"kernels": statistics.median(len(k) for k in per_step),
            "kernel_us": statistics.median(sum(e["dur_us"] for e in k) for k in per_step)}


# --- notebook 05's two comparisons (any device) --------------------------------------------

@torch.no_grad()
def compare_replay(model, idx, steps: int, pad_lens=None, buckets=None,
                   requests: int = 2, check_reference: bool = False) -> dict:
    """Graph replay vs the same static step run eagerly, bit for bit, at every step, for
    `requests` requests back to back on the same two decoders. Needs CUDA."""
    ref = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    fast = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=True)
    # a second eager reference: is the eager static step itself deterministic?
    twin = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False) if check_reference else None
    first, first_twin, windows, n = None, None, set(), 0
    for r in range(requests):
        a, b = ref.prefill(idx, pad_lens), fast.prefill(idx, pad_lens)
        if twin is not None:
            twin.prefill(idx, pad_lens)
        tok = a[:, -1:].argmax(-1)
        for s in range(steps):
            windows.add(fast.bucket_for(fast.cache.n + 1))
            a, b = ref.step(tok), fast.step(tok)
            n += 1
            if first is None and not torch.equal(a, b):
                first = {"request": r, "step": s, "max_abs_diff": (a - b).abs().max().item()}
            if twin is not None:
                c = twin.step(tok)
                if first_twin is None and not torch.equal(a, c):
                    first_twin = {"request": r, "step": s, "max_abs_diff": (a - c).abs().max().item()}
            tok = a[:, -1].argmax(-1, keepdim=True)
    out = {"batch": idx.shape[0], "pad_lens": None if pad_lens is None else pad_lens.tolist(),
           "requests": requests, "steps": n, "windows": sorted(windows),
           "all_equal": first is None, "first_difference": first}
    if twin is not None:
        out["reference_deterministic"] = first_twin is None
        out["reference_first_difference"] = first_twin
    return out


@torch.no_grad()
def compare_eager_static(model, idx, steps: int, pad_lens=None, buckets=None) -> dict:
    """Eager decode (dynamic cache, exact length, no mask) vs the static step (fixed window,
    masked), both fed the eager run's greedy tokens. Per step: the largest logit difference
    and the rows whose greedy token differs, with the eager top-1 minus top-2 margin there."""
    cache = KVCache(model.cfg.n_layers, first_valid=pad_lens)
    a = prefill(model, idx, cache)
    static = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    b = static.prefill(idx, pad_lens)
    diffs, flips, agree = [], [], 0
    for s in range(steps):
        la, lb = a[:, -1].float(), b[:, -1].float()
        diffs.append((la - lb).abs().max().item())
        ta, tb = la.argmax(-1), lb.argmax(-1)
        agree += int((ta == tb).sum())
        for row in (ta != tb).nonzero().flatten().tolist():
            top2 = la[row].topk(2).values
            flips.append({"step": s, "row": row, "margin": (top2[0] - top2[1]).item()})
        tok = ta[:, None]
        a = decode_step(model, cache, tok, check=False)
        b = static._step(tok)
    return {"batch": idx.shape[0], "steps": steps, "max_logit_diff_per_step": diffs,
            "max_logit_diff": max(diffs), "token_agreement": agree / (steps * idx.shape[0]),
            "first_flip_step": flips[0]["step"] if flips else None, "flips": flips}


# --- the GPU measurements ------------------------------------------------------------------

def pool_bytes(pool) -> int:
    """Bytes reserved by one graph memory pool, from the allocator's snapshot."""
    return sum(seg["total_size"] for seg in torch.cuda.memory_snapshot()
               if tuple(seg.get("segment_pool_id", ())) == tuple(pool))


def measure_capture(model, idx) -> dict:
    out = {"batch": idx.shape[0], "windows": [], "capture_s": [], "pool_bytes": []}
    buckets = GraphDecoder(model, idx.shape[0]).buckets
    for w in buckets:  # each window alone, in a fresh pool of its own
        d = GraphDecoder(model, idx.shape[0])
        d.prefill(idx)
        out["windows"].append(w)
        out["capture_s"].append(round(d.capture((w,)), 4))
        out["pool_bytes"].append(pool_bytes(d.graphs.pool))
        del d
    d = GraphDecoder(model, idx.shape[0])
    d.prefill(idx)
    out["total_capture_s"] = round(d.capture(), 4)
    out["shared_pool_bytes"] = pool_bytes(d.graphs.pool)
    out["separate_pools_bytes"] = sum(out["pool_bytes"])
    return out


def copy_bandwidth_GBps() -> float:
    x = torch.empty(2**28, dtype=torch.float32, device="cuda").normal_()  # 1 GiB
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        y.copy_(x)
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / 10
    return 2 * x.numel() * x.element_size() / seconds / 1e9  # bytes read + written


def measure_engine(model, n_slots: int, n_requests: int, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    text = Tokenizer().encode(PROMPT * 10)
    lens = torch.randint(8, 65, (n_requests,), generator=gen).tolist()
    news = torch.randint(32, 257, (n_requests,), generator=gen).tolist()
    out = {"n_slots": n_slots, "n_requests": n_requests, "prompt_lens": [min(lens), max(lens)],
           "max_new_tokens": [min(news), max(news)], "n_tokens": sum(news)}
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
    """A static-cache step through torch.compile(model, mode=...): `buckets` None is the
    project's default buckets, (max_len,) the gpt-fast layout (one window of max_len keys).
    static_addresses marks the cache tensors as fixed, as module buffers are."""
    decoder = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    decoder.prefill(idx)
    if static_addresses:
        c = decoder.cache
        for t in c.k + c.v + [c.pos, c.first_valid, decoder.tok]:
            torch._dynamo.mark_static_address(t)
    decoder.graphs.step_model = torch.compile(model, mode=mode)
    return decoder._step


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
        return d._step

    def fused_eager():
        d = GraphDecoder(model, batch, fused=True, use_graph=False)
        d.prefill(idx)
        return d._step

    variants = {
        "eager": lambda: make_step(model, "eager", idx),
        "graph (unfused kernels, bucketed)": lambda: make_step(model, "graph", idx),
        "reduce-overhead, project cache": lambda: compiled_static_step(model, idx, "reduce-overhead"),
        "reduce-overhead, gpt-fast style": lambda: compiled_static_step(
            model, idx, "reduce-overhead", buckets=(max_len,), static_addresses=True),
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
        rows.append({"name": name, "step_us": round(t["step_us"], 1), "cpu_us": round(t["cpu_us"], 1),
                     "setup_s": round(setup_s, 2), "peak_memory_bytes": peak,
                     "kernels": kernels["kernels"], "kernel_us": round(kernels["kernel_us"], 1),
                     "cudagraph_skips": skips})
        print("fusion", rows[-1], flush=True)
    by = {r["name"]: r for r in rows}
    return {"batch": batch, "positions": [32, 32 + n_steps + 40], "rows": rows,
            "fused_over_gptfast": round(by["fused kernels in bucketed graphs"]["step_us"]
                                        / by["reduce-overhead, gpt-fast style"]["step_us"], 3),
            "compile": FUSED_COMPILE}


def run(quick: bool, out_path: Path | None, trace_path: Path | None, command: str,
        commit: str | None) -> dict:
    if not torch.cuda.is_available():
        raise SystemExit("tinyllm.lab.bench measures a GPU and this machine has none; the "
                         "notebooks show the recorded results from results/ instead")
    model = load_pretrained("cuda")
    prompt_len, n_steps = 32, (64 if quick else 256)
    batches = [1, 8, 64] if quick else [1, 2, 4, 8, 16, 32, 64]
    res = {"provenance": provenance(command, commit),
           "operating_point": {"model": "tiny", "n_params": model.n_params(),
                               "prompt_len": prompt_len, "decode_steps": n_steps,
                               "max_len": model.cfg.max_seq_len,
                               "buckets": list(GraphDecoder(model, 1).buckets),
                               "dtype": "bfloat16 autocast",
                               "timing": "median over the decode steps after 16 warm-up steps, "
                                         "each timed with CUDA events; the step as generate() "
                                         "runs it, sampling excluded"}}
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
            print(f"batch {B:3d} {mode:6s} step {t['step_us']:8.1f} us  cpu {t['cpu_us']:8.1f} us"
                  f"  kernels {k['kernels']:4.0f} ({k['kernel_us']:.1f} us)", flush=True)
    # the same eager step with cuDNN attention allowed: a new plan for every key length
    from tinyllm import generation
    saved = list(generation.ATTENTION_BACKENDS)
    generation.ATTENTION_BACKENDS.append(torch.nn.attention.SDPBackend.CUDNN_ATTENTION)
    try:
        idx = prompt_batch(1, prompt_len, "cuda")
        t = time_steps(make_step(model, "eager", idx), idx[:, -1:].clone(), min(n_steps, 64), warmup=4)
        res["eager_with_cudnn_attention"] = {"batch": 1, "step_us": round(t["step_us"], 1)}
        print("eager with cuDNN attention", res["eager_with_cudnn_attention"], flush=True)
    finally:
        generation.ATTENTION_BACKENDS[:] = saved
    step_time["speedup"] = [round(e / g, 2) for e, g in zip(step_time["eager_us"], step_time["graph_us"])]
    res["step_time"], res["cpu_time"], res["gpu_kernel_time"] = step_time, cpu_time, kernel_time
    res["kernels_per_step"] = kernels
    res["graph_busy_fraction"] = {"batch": batches, "fraction": [
        round(k / s, 3) for k, s in zip(kernel_time["graph_us"], step_time["graph_us"])]}
    weight_bytes = model.n_params() * 2
    bw = copy_bandwidth_GBps()
    res["bandwidth"] = {"weight_bytes": weight_bytes, "copy_GBps": round(bw, 1),
                        "floor_us": round(weight_bytes / (bw * 1e9) * 1e6, 2)}
    idx1 = prompt_batch(1, prompt_len, "cuda")
    res["capture"] = measure_capture(model, idx1)
    print("capture", res["capture"], flush=True)
    idx4, pads = left_pad([Tokenizer().encode(PROMPT)[:n] for n in (32, 20, 9, 27)],
                          Tokenizer().pad_id, "cuda")
    steps = model.cfg.max_seq_len - idx4.shape[1]
    res["bit_exact"] = compare_replay(model, idx4, 64 if quick else steps, pad_lens=pads,
                                      check_reference=True)
    print("bit_exact", {k: v for k, v in res["bit_exact"].items()}, flush=True)
    cmp = compare_eager_static(model, prompt_batch(8, prompt_len, "cuda"), n_steps)
    res["eager_vs_static"] = cmp
    print("eager_vs_static", {k: v for k, v in cmp.items() if k != "max_logit_diff_per_step"},
          flush=True)
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
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="batches 1, 8, 64 and 64 steps")
    p.add_argument("--out", type=Path, default=None,
                   help="default: results/<gpu>.json, or results/<gpu>-<date-time>.json if that exists")
    p.add_argument("--trace-out", type=Path, default=None,
                   help="default: results/traces/ with the same file name")
    p.add_argument("--commit", default=os.environ.get("TINYLLM_COMMIT"),
                   help="git commit to record (default: git rev-parse HEAD)")
    args = p.parse_args(argv)
    command = "python -m tinyllm.lab.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    run(args.quick, args.out, args.trace_out, command.strip(), args.commit)


if __name__ == "__main__":
    main()
