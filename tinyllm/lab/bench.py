"""The measurements behind results/: python -m tinyllm.lab.bench (a benchmark, not a test).

    python -m tinyllm.lab.bench            # on a GPU: writes results/<gpu>.json and a trace
    python -m tinyllm.lab.bench --quick    # fewer batch sizes and repeats, for a first look

with TEARDOWN_CUPTI=1 in the environment, as `make bench` sets it: otherwise each section's
profiler session leaves CUPTI attached, and later times that hold a launch grow (notebook 11,
Reference R.3).

Operating point: the shipped model, a 32-token prompt, then decode steps at positions 32 and
on, in the window of 128 keys. The step-time cells are timed in interleaved repeats (lab/peers.py):
the median of each repeat's steps, each step timed with CUDA events, back to back as a
decode loop runs them; the file keeps the median over repeats and its min–max. Three ways to
run the same decode step:

- eager:  generation.decode_step with the dynamic KVCache (what generate() does);
- static: GraphDecoder(use_graph=False), the fixed-shape step run eagerly;
- graph:  GraphDecoder(use_graph=True), the same step replayed from a CUDA graph;

and, at batch 1, the peers (lab/peers.py): fused kernels in the bucketed graphs,
reduce-overhead as a user first tries it, and gpt-fast's recipe as its generate.py runs it.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from tinyllm import (
    Engine,
    GraphDecoder,
    Limits,
    ModelConfig,
    PagedEngine,
    Tokenizer,
    Transformer,
    default_buckets,
    load_pretrained,
)
from tinyllm.checkpoint import same_file, validate_outputs, write_whole
from tinyllm.generation import left_pad
from tinyllm.graphs import COURSE_COMPILE
from tinyllm.lab import engine_time, gptfast, pages, peers
from tinyllm.lab.exactness import compare_eager_static, compare_replay
from tinyllm.lab.prompts import PROMPT, prompt_batch
from tinyllm.lab.timing import copy_bandwidth_GBps, pool_bytes, step_times
from tinyllm.precision import ATTENTION_BACKENDS

RESULTS = Path(__file__).resolve().parents[2] / "results"
SECTIONS = (
    "steps",
    "capture",
    "exactness",
    "engine",
    "peers",
    "sweep",
    "windows",
    "paged",
    "engine_paged",
    "engine_scale",
    "hf",
    "sizes",
)


def gpu_slug(name: str) -> str:
    return name.lower().replace("nvidia", "").strip().replace(" ", "_")


def git(*args) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def provenance(command: str, commit: str | None = None, dirty: bool | None = None) -> dict:
    """Where a measurement comes from. commit and dirty default to git's view of this
    checkout (TINYLLM_COMMIT / TINYLLM_DIRTY where the copy has no .git)."""
    commit = commit or os.environ.get("TINYLLM_COMMIT") or git("rev-parse", "--short", "HEAD")
    if dirty is None:
        status = git("status", "--porcelain", "--untracked-files=no")
        dirty = os.environ.get("TINYLLM_DIRTY") == "1" if status is None else bool(status)
    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "dirty": dirty,
        "command": command,
    }


# --- the sections ----------------------------------------------------------------------------


def measure_steps(model, batches, repeats: int) -> tuple[dict, dict]:
    """Eager, static and graph at every batch size: step time (median, min, max over the
    repeats), host time, kernel time and kernels; and traces of two steps for the timeline,
    per batch size."""
    out = {k: {"batch": batches} for k in ("step_time", "cpu_time", "gpu_kernel_time", "kernels")}
    traces = {}
    for B in batches:
        idx = prompt_batch(B, 32, "cuda")
        variants = [peers.step_variant(model, idx, m) for m in ("eager", "static", "graph")]
        rows = peers.measure(variants, repeats=repeats, keep_trace=True)
        traces[str(B)] = {r["name"]: r.pop("trace") for r in rows if r["name"] != "static"}
        for r in rows:
            m = r["name"]
            for key, value in (("", "median"), ("_min", "min"), ("_max", "max")):
                out["step_time"].setdefault(f"{m}{key}_us", []).append(r["step_us"][value])
            out["cpu_time"].setdefault(f"{m}_us", []).append(r["cpu_us"])
            out["gpu_kernel_time"].setdefault(f"{m}_us", []).append(r["kernel_us"])
            out["kernels"].setdefault(m, []).append(r["kernels"])
    st = out["step_time"]
    st["speedup"] = [round(e / g, 2) for e, g in zip(st["eager_us"], st["graph_us"])]
    out["kernels_per_step"] = {m: out["kernels"][m][0] for m in ("eager", "static", "graph")}
    out["graph_busy_fraction"] = {
        "batch": batches,
        "fraction": [
            round(k / s, 3) for k, s in zip(out["gpu_kernel_time"]["graph_us"], st["graph_us"])
        ],
    }
    idx = prompt_batch(1, 32, "cuda")  # cuDNN attention plans anew for every key length
    cudnn = [*ATTENTION_BACKENDS, SDPBackend.CUDNN_ATTENTION]
    with_cudnn = peers.eager(model, idx, attention_backends=cudnn)
    t = step_times(with_cudnn.step, with_cudnn.tok, 40)
    out["eager_with_cudnn_attention"] = {"batch": 1, "step_us": round(statistics.median(t), 1)}
    return out, traces


def measure_capture(model, idx) -> dict:
    """Capture time and pool memory: each window alone in a fresh pool, all of them in one
    shared pool (largest first, as capture() does), and smallest first."""
    out = {"batch": idx.shape[0], "windows": [], "capture_s": [], "pool_bytes": []}
    buckets = default_buckets(model.cfg.max_seq_len)
    for w in buckets:
        d = GraphDecoder(model, idx.shape[0])
        d.prefill(idx)
        out["windows"].append(w)
        out["capture_s"].append(round(d.capture((w,)), 4))
        out["pool_bytes"].append(pool_bytes(d.pool))
    for order in ("largest_first", "smallest_first"):
        d = GraphDecoder(model, idx.shape[0])
        d.prefill(idx)
        seconds, after = 0.0, []
        for w in sorted(buckets, reverse=order == "largest_first"):
            seconds += d.capture((w,))  # the capture alone, not the pool's snapshot below
            after.append(pool_bytes(d.pool))
        out[f"{order}_pool_bytes"] = after  # the shared pool after each capture
        out[f"{order}_capture_s"] = round(seconds, 4)
    out["shared_pool_bytes"] = out["largest_first_pool_bytes"][-1]
    out["total_capture_s"] = out["largest_first_capture_s"]
    out["separate_pools_bytes"] = sum(out["pool_bytes"])
    return out


def measure_engine(model, n_slots: int, n_requests: int, seed: int = 0) -> dict:
    prompts, news = engine_time.workload(n_requests, seed)
    lens = [len(p) for p in prompts]
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
        _, seconds = engine_time.serve(engine, prompts, news)
        out[f"{mode}_s"] = round(seconds, 3)
        out[f"{mode}_tok_s"] = round(sum(news) / seconds, 1)
    out["speedup"] = round(out["graph_tok_s"] / out["eager_tok_s"], 2)
    return out


def measure_engine_scale(n_requests: int, sizes=(1, 8, 32, 64, 128, 256),
                         compare=(32, 128, 256), rounds: int = 3) -> dict:  # fmt: skip
    """PagedEngine(overlap=True) on the bench's request distribution (lab.engine_time.scale),
    8 requests a row (at least 64, at most n_requests), each run in a process of its own
    (engine_time.scale_apart): "rows", the engine at every size; "repeats", the same again
    at the sizes of `compare`, rounds 2 to `rounds`, for the spread between processes;
    "before", min_admit=1 (an admission whenever a row is free) at those sizes; "compile",
    compile=True there, its compile time in capture_and_compile_s and its compiles counted.
    Each row: tok/s, the host's time per step (engine_time.HOST_PER_STEP), the all-rows graph
    replayed alone, GPU busy (engine_time.GPU_BUSY_EVENTS)."""

    def run(n_rows, **kwargs):
        n = min(n_requests, max(64, 8 * n_rows))
        row = engine_time.scale_apart(n_rows, n, **kwargs)
        print("engine_scale", json.dumps(row), flush=True)
        return row

    return {
        "host_us_per_step": engine_time.HOST_PER_STEP,
        "gpu_busy_share": engine_time.GPU_BUSY_EVENTS,
        "gpu_us_per_step": engine_time.GPU_PER_STEP,
        "gpu_us_per_fill": engine_time.GPU_PER_FILL,
        "rows": [run(n) for n in sizes],
        "repeats": [dict(run(n), round=r) for r in range(2, rounds + 1) for n in compare],
        "before": [run(n, min_admit=1) for n in compare],
        "before_label": "min_admit=1",
        "compile": [run(n, compile=True) for n in compare],
    }


# Hugging Face's continuous batching: its defaults, then its fast settings (its docs' names).
# With CUDA graphs, num_blocks is set: left to HF, the cache takes 90% of the free memory, and
# the graphs' static attention mask (batch tokens × every cached token) ran out of memory on
# the H200 (results/gpu_checks/2026-12-02_c58a9f7). A request of the workload holds at most 312
# tokens, two blocks of 256: 1024 blocks hold all 256 requests at once, twice over. A row with
# that cache alone, no graphs, tells the two apart.
HF_CACHE = {"num_blocks": 1024}
HF_BATCHING = {
    "hf continuous batching, defaults": {},
    "hf continuous batching, num_blocks=1024": HF_CACHE,
    "hf continuous batching, use_cuda_graph + use_async_batching": {
        "use_cuda_graph": True, "use_async_batching": True} | HF_CACHE,
    "hf continuous batching, the same + default_compile_level=1": {
        "use_cuda_graph": True, "use_async_batching": True, "default_compile_level": 1}
    | HF_CACHE,
}  # fmt: skip


def graph_generate_us(model, prompt: list[int], n_new: int, compile=False, use_graph=True,
                      runs: int = 3) -> tuple[dict, torch.Tensor]:  # fmt: skip
    """GraphDecoder(kv="paged").generate at batch 1, greedy (use_graph=False: the same step
    eagerly): µs per new token, the median and the least of `runs` after one warm run, the
    seconds of it all with the warm run (and the capture), and the ids."""
    t0 = time.perf_counter()
    decoder = GraphDecoder(model, 1, max_len=512, kv="paged", compile=compile,
                           use_graph=use_graph, limits=Limits(params=model.n_params()))  # fmt: skip
    idx = torch.tensor([prompt], device=next(model.parameters()).device)
    decoder.generate(idx, n_new)
    timed = [peers.wall_s(lambda: decoder.generate(idx, n_new)) for _ in range(runs)]
    us = [s / n_new * 1e6 for s, _ in timed]
    row = {"us_per_token": round(statistics.median(us), 1), "min": round(min(us), 1),
           "wall_s_with_warm": round(time.perf_counter() - t0, 1)}  # fmt: skip
    return row, timed[-1][1][0]


def measure_hf(model, n_requests: int) -> dict:
    """Hugging Face transformers beside the course, on the same weights, in the same run
    (lab/peers.py): generate() at batch 1 with HF's fast path against GraphDecoder(kv="paged")
    unfused and compiled, µs per token; continuous batching on the engine workload with HF's
    defaults, its cache sized (HF_CACHE), and its fast settings with that cache (a setting
    that fails keeps its error), against
    PagedEngine(overlap=True) at 32 and 256 rows, tok/s, and the share of requests whose
    greedy tokens equal the course engine's."""
    prompt = engine_time.workload(1)[0][0]
    t0 = time.perf_counter()
    hf = peers.hf_generate_us(model, prompt)
    rows = [{"name": "hf static + CompileConfig(reduce-overhead, fullgraph)",
             "us_per_token": hf["us_per_token"], "min": hf["min"],
             "wall_s_with_warm": round(time.perf_counter() - t0, 1)}]  # fmt: skip
    for compile in (False, True):
        row, ids = graph_generate_us(model, prompt, 256, compile)
        rows.append({"name": f"course GraphDecoder(kv='paged', compile={compile})", **row,
                     "tokens_equal_hf": ids.tolist() == hf["ids"]})  # fmt: skip
    what = ("batch 1, 256 new tokens after a prompt of the bench's workload, greedy; µs per "
            "token, median of 3 timed runs after the warm ones")  # fmt: skip
    generate = {"what": what, "rows": rows}
    prompts, news = engine_time.workload(n_requests)
    rows, course = [], None
    for n_rows in (32, 256):
        e = PagedEngine(model, n_rows, max_len=512, overlap=True)
        e.capture()
        engine_time.serve(e, prompts, news)
        done, s = engine_time.serve(e, prompts, news)
        course = course or [done[rid] for rid in sorted(done)]
        rows.append({"name": f"course PagedEngine({n_rows} rows, overlap=True)",
                     "tok_s": round(sum(news) / s, 1)})  # fmt: skip
    for name, config in HF_BATCHING.items():
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        try:
            row = peers.hf_continuous_batching(model, prompts, news, **config)
        except Exception as error:  # a setting that fails is a result too
            rows.append({"name": name, "config": config,
                         "wall_s": round(time.perf_counter() - t0, 1),
                         "error": f"{type(error).__name__}: {str(error)[:200]}"})  # fmt: skip
            continue
        ids = row.pop("ids")
        row["greedy_share_equal_course"] = round(
            sum(a == b for a, b in zip(ids, course)) / len(ids), 4)  # fmt: skip
        row["lengths_as_asked"] = all(len(t) == n for t, n in zip(ids, news))
        rows.append({"name": name, "config": config, **row,
                     "wall_s": round(time.perf_counter() - t0, 1)})  # fmt: skip
        print("hf", json.dumps(rows[-1]), flush=True)
    engine = {"what": f"the bench's engine workload, engine_time.workload({n_requests}): each "
              "request its own max_new_tokens, greedy, no eos; tok/s of a second run",
              "rows": rows}  # fmt: skip
    return {"generate": generate, "engine": engine}


# Llama configurations of about 3 M (the shipped model's shape) to 1.5 B parameters
LLAMA_SIZES = {
    "tiny (the shipped shape)": ModelConfig(),
    "SmolLM2-135M": ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9,
                                n_kv_heads=3, ffn_hidden=1536, max_seq_len=2048,
                                rope_theta=100000.0),
    "SmolLM2-360M": ModelConfig(vocab_size=49152, d_model=960, n_layers=32, n_heads=15,
                                n_kv_heads=5, ffn_hidden=2560, max_seq_len=2048,
                                rope_theta=100000.0),
    "Llama-3.2-1B": ModelConfig(vocab_size=128256, d_model=2048, n_layers=16, n_heads=32,
                                n_kv_heads=8, ffn_hidden=8192, max_seq_len=2048,
                                rope_theta=500000.0),
}  # fmt: skip


def measure_sizes(bandwidth_GBps: float = 4800.0, runs: int = 5) -> dict:
    """Where graphs stop mattering: the course's model at each of LLAMA_SIZES, random
    weights, bf16, GraphDecoder(kv="paged") at batch 1, generate() of 128 tokens after 32,
    with graphs and eagerly, µs per token; beside each, the weights' bytes over the
    bandwidth (the H200's HBM3e peak by default)."""
    rows = []
    for name, cfg in LLAMA_SIZES.items():
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = Transformer(cfg, limits=Limits(params=2**31)).to(torch.bfloat16).eval()
        prompt = torch.randint(0, cfg.vocab_size, (32,)).tolist()
        graph, graph_ids = graph_generate_us(model, prompt, 128, runs=runs)
        eager, eager_ids = graph_generate_us(model, prompt, 128, use_graph=False, runs=runs)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        rows.append({
            "name": name, "params": model.n_params(), "weight_bytes": weight_bytes,
            "floor_us": round(weight_bytes / (bandwidth_GBps * 1e9) * 1e6, 1),
            "graph_us": graph["us_per_token"], "graph_min_us": graph["min"],
            "eager_us": eager["us_per_token"], "eager_min_us": eager["min"],
            "tokens_equal": graph_ids.tolist() == eager_ids.tolist(),
            "graph_gain": round(eager["us_per_token"] / graph["us_per_token"], 2),
            "config": dataclasses.asdict(cfg),
        })  # fmt: skip
        print("sizes", json.dumps(rows[-1]), flush=True)
        del model
        torch.cuda.empty_cache()
    what = (f"the course's model at Llama configurations, random weights, bf16, "
            f"GraphDecoder(kv='paged') at batch 1, generate() of 128 tokens after 32; µs per "
            f"token, median of {runs}, with graphs and eagerly; floor_us: the weights' bytes "
            f"over {bandwidth_GBps / 1000:g} TB/s")  # fmt: skip
    return {"what": what, "bandwidth_GBps": bandwidth_GBps, "rows": rows}


def measure_engine_paged(model, n_requests: int) -> dict:
    """The paged engine beside the graphed slot engine, both with graphs, on the engine
    workload, at 32 and 8 slots (lab.engine_time.measure: each engine's tok_s and host
    sections, then its GPU busy share from a profiled run). A row's tok_s is the paged
    engine with overlap=True, speedup_over_slots its tok_s over the slot engine's."""
    out = {"rows": [], "detail": {}, "gpu_busy_share": engine_time.GPU_BUSY}
    for n_slots in (32, 8):
        profile = ("slots", "paged_overlap") if n_slots == 32 else ("paged_overlap",)
        m = engine_time.measure(model, n_slots, n_requests, profile)
        best = m["paged_overlap"]
        out["rows"].append({
            "n_slots": n_slots,
            "tok_s": best["tok_s"],
            "gpu_busy_share": best["gpu_busy_share"],
            "speedup_over_slots": round(best["tok_s"] / m["slots"]["tok_s"], 2),
            "tok_s_overlap_false": m["paged_prefill_graphs"]["tok_s"],
            "slots_tok_s": m["slots"]["tok_s"],
        })  # fmt: skip
        out["detail"][str(n_slots)] = m
    return out


def measure_peers(model, repeats: int) -> tuple[dict, dict]:
    """Batch 1, window 128: eager, static, graph; fused kernels without graphs, and in the
    bucketed graphs (COURSE_COMPILE, and with Inductor's defaults, to tell the graphs from
    the compiler's settings); reduce-overhead as a user first tries it; gpt-fast as its
    generate.py runs it, with its tables at static addresses, forward only, and with the
    setting of COURSE_COMPILE that generate.py lacks (PDL). Built once each (compiling and
    capturing), then timed together, interleaved. Also returns the variants, for the sweep."""
    idx = prompt_batch(1, 32, "cuda")
    torch._dynamo.reset()
    variants = [peers.step_variant(model, idx, m) for m in ("eager", "static", "graph")]
    extra = {k: v for k, v in COURSE_COMPILE["options"].items()
             if k not in gptfast.GENERATE_PY_INDUCTOR}  # fmt: skip
    builds = [
        partial(
            peers.decoder, model, idx, "fused kernels, no graph", use_graph=False, compile=True
        ),
        partial(peers.decoder, model, idx, "fused kernels in bucketed graphs", compile=True),
        partial(
            peers.decoder,
            model,
            idx,
            "fused kernels in bucketed graphs, Inductor defaults",
            compile={},
        ),  # fmt: skip
        partial(peers.reduce_overhead_first_try, model, idx),
        partial(peers.gpt_fast, model, idx, 256),
        partial(peers.gpt_fast, model, idx, 256, static_tables=True),
        partial(peers.gpt_fast, model, idx, 256, forward_only=True, static_tables=True),
        partial(
            peers.gpt_fast, model, idx, 256, forward_only=True, static_tables=True, extra=extra
        ),  # fmt: skip
    ]
    skips = {}
    for build in builds:
        counters_clear()
        variants.append(build())
        skips[variants[-1].name] = peers.skipped_cudagraphs()
    rows = peers.measure(variants, repeats=repeats)
    for r in rows:
        r["cudagraph_skips"] = skips.get(r["name"], 0)
    by = {v.name: v for v in variants}
    breakdown = {n: peers.host_breakdown(by[n]) for n in
                 ("reduce-overhead, first try", "gpt-fast", "gpt-fast, static tables")}  # fmt: skip
    return {"batch": 1, "positions": [32, 75], "window": 128, "rows": rows,
            "compile": COURSE_COMPILE, "gpt_fast_extra": extra,
            "host_breakdown": breakdown}, by  # fmt: skip


def counters_clear() -> None:
    from torch._dynamo.utils import counters

    counters.clear()


def measure_paged(model, repeats: int) -> dict:
    """Notebook 08's measurements: the steps on equal footing (lab.pages: gpt-fast's kernels
    and the course's, each replayed from a graph with one token copy per step), the attention
    call against length, the paged step against position, the capture sizes' graphs, and
    replay against the eager paged step."""
    attention = pages.attention_times(cfg=model.cfg)  # before any profiler session: R.3
    idx = prompt_batch(1, 32, "cuda")
    extra = {k: v for k, v in COURSE_COMPILE["options"].items()
             if k not in gptfast.GENERATE_PY_INDUCTOR}  # fmt: skip
    torch._dynamo.reset()
    rows = peers.measure(pages.equal_footing(model, idx, extra), repeats=repeats)
    sweep = pages.paged_sweep(model, idx)
    return {"batch": 1, "positions": [32, 75], "rows": rows, "gpt_fast_extra": extra,
            "gpt_fast_cache": 32 + 256, "attention": attention,
            "sweep": sweep, "capture": pages.capture_sizes(model),
            "exactness": pages.paged_exactness(model)}  # fmt: skip


def paged_headline(p: dict) -> dict:
    """The paged section's headline keys: the steps on an ideal host (lab.pages) against
    gpt-fast's on the same footing with the course's extra setting, and the paged step's
    flatness (positions >= 1000 over 32-75)."""
    ideal = {r["name"]: r for r in p["rows"]}
    extra = ", ".join(f"{k}={v}" for k, v in p["gpt_fast_extra"].items())
    gpt = ideal[f"gpt-fast, ideal host, {extra}"]["step_us"]["median"]
    fused = ideal["fused kernels in bucketed graphs, ideal host"]["step_us"]["median"]
    paged, paged_fused = ideal["paged, ideal host"], ideal["paged fused, ideal host"]
    return {
        "gptfast_ideal_us": gpt,
        "fused_over_gptfast_ideal": round(fused / gpt, 3),
        "paged_step_us": paged["step_us"]["median"],
        "paged_kernels": paged["kernels"],
        "paged_fused_step_us": paged_fused["step_us"]["median"],
        "paged_fused_kernels": paged_fused["kernels"],
        "paged_over_gptfast_ideal": round(paged_fused["step_us"]["median"] / gpt, 3),
        "paged_long_over_short": pages.long_over_short(p["sweep"], "paged fused"),
    }


def headline(res: dict) -> dict:
    """Batch 1, window 128: the course's graph and fused steps against gpt-fast in its
    strongest form (peers.strongest_gptfast), eager, and the engine; with the paged section,
    the steps on an ideal host (lab.pages) and the paged step's flatness."""
    rows = {r["name"]: r for r in res["fusion"]["rows"]}
    best = rows["fused kernels in bucketed graphs"]
    gptfast = peers.strongest_gptfast(res["fusion"]["rows"])["step_us"]["median"]
    out = {
        "graph_step_us": rows["graph"]["step_us"]["median"],
        "graph_kernels": rows["graph"]["kernels"],
        "fused_step_us": best["step_us"]["median"],
        "fused_kernels": best["kernels"],
        "gptfast_reduce_overhead_us": gptfast,
        "best_over_gptfast": round(best["step_us"]["median"] / gptfast, 3),
        "eager_step_us": rows["eager"]["step_us"]["median"],
        "engine_speedup_32_slots": res["engine"]["speedup"],
    }
    if "paged" in res:
        out |= paged_headline(res["paged"])
    return out


def record(args, command: str) -> dict:
    if not torch.cuda.is_available():
        raise SystemExit(
            "tinyllm.lab.bench measures a GPU and this machine has none; the "
            "notebooks show the recorded results from results/ instead"
        )
    if os.environ.get("TEARDOWN_CUPTI") != "1":  # as `make bench` runs it
        print(
            "TEARDOWN_CUPTI is not 1: after each profiler session, times that hold a graph's "
            "launch or CUDA events grow (notebook 11, R.3)",
            file=sys.stderr,
        )
    model = load_pretrained("cuda")
    sections = args.sections.split(",") if args.sections else SECTIONS
    repeats = 3 if args.quick else 5
    batches = [1, 8, 64] if args.quick else [1, 2, 4, 8, 16, 32, 64]
    res = {
        "provenance": provenance(command),
        "operating_point": {
            "model": "tiny",
            "n_params": model.n_params(),
            "prompt_len": 32,
            "positions": [32, 75],
            "window": 128,
            "repeats": repeats,
            "max_len": model.cfg.max_seq_len,
            "buckets": list(default_buckets(model.cfg.max_seq_len)),
            "dtype": str(next(model.parameters()).dtype),
            "timing": peers.__doc__.split("\n\n")[1].replace("\n", " "),
        },
    }
    traces = {}
    if "steps" in sections:
        steps, traces = measure_steps(model, batches, repeats)
        res.update(steps)
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        bw = copy_bandwidth_GBps()
        res["bandwidth"] = {
            "weight_bytes": weight_bytes,
            "copy_GBps": round(bw, 1),
            "floor_us": round(weight_bytes / (bw * 1e9) * 1e6, 2),
        }
    if "capture" in sections:
        res["capture"] = measure_capture(model, prompt_batch(1, 32, "cuda"))
    if "exactness" in sections:
        idx4, pads = left_pad(
            [Tokenizer().encode(PROMPT)[:n] for n in (32, 20, 9, 27)], Tokenizer().pad_id, "cuda"
        )
        steps = 64 if args.quick else model.cfg.max_seq_len - idx4.shape[1]
        res["bit_exact"] = compare_replay(model, idx4, steps, pad_lens=pads, check_reference=True)
        res["eager_vs_static"] = compare_eager_static(model, prompt_batch(8, 32, "cuda"), 256)
    if "engine" in sections:
        res["engine"] = measure_engine(model, 32, 64 if args.quick else 256)
    if "engine_paged" in sections:
        res["engine_paged"] = measure_engine_paged(model, 64 if args.quick else 256)
    if "engine_scale" in sections:
        res["engine_scale"] = measure_engine_scale(256 if args.quick else 2048)
    if "hf" in sections and importlib.util.find_spec("transformers"):
        res["provenance"]["transformers"] = importlib.import_module("transformers").__version__
        res["hf"] = measure_hf(model, 64 if args.quick else 256)
    if "sizes" in sections:
        res["sizes"] = measure_sizes()
    built = {}
    if "peers" in sections:
        res["fusion"], built = measure_peers(model, repeats)
        diet = json.loads(args.diet.read_text()) if args.diet else None
        res["cost_model"] = peers.cost_model(res["fusion"]["rows"], diet)
        res["host_breakdown"] = res["fusion"].pop("host_breakdown")
    if "sweep" in sections and built:
        res["position_sweep"] = peers.measure_sweep(model, built, prompt_batch(1, 32, "cuda"))
    if "paged" in sections:
        res["paged"] = measure_paged(model, repeats)
    if "windows" in sections:
        res["window_times"] = {
            str(B): peers.window_times(model, prompt_batch(B, 32, "cuda"), repeats) for B in (1, 8)
        }
    if {"peers", "engine"} <= set(sections):
        res["headline"] = headline(res)
    elif "paged" in res:
        res["headline"] = paged_headline(res["paged"])
    for key, value in res.items():
        print(key, json.dumps(value)[:600], flush=True)
    out_path = args.out
    if out_path is None:  # never overwrite a recording (results/h200.json ships with the course)
        out_path = RESULTS / f"{gpu_slug(res['provenance']['gpu'])}.json"
        if out_path.exists():
            out_path = out_path.with_name(f"{out_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}.json")
    trace_path = args.trace_out or RESULTS / "traces" / out_path.name
    if args.trace_out is None and (trace_path.exists() or same_file(trace_path, out_path)):
        # the default never writes over a recorded trace, nor over out
        trace_path = trace_path.with_name(
            f"{trace_path.stem}-trace-{time.strftime('%Y%m%d-%H%M%S')}.json"
        )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out_path, lambda partial: Path(partial).write_text(json.dumps(res, indent=1)))
    if traces:
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        trace = {"provenance": res["provenance"], "batch": traces}
        write_whole(trace_path, lambda partial: Path(partial).write_text(json.dumps(trace)))
    print(f"wrote {out_path}" + (f" and {trace_path}" if traces else ""))
    return res


def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="batches 1, 8, 64; 3 repeats")
    p.add_argument("--sections", default=None, help=f"comma-separated, of {','.join(SECTIONS)}")
    p.add_argument(
        "--diet",
        type=Path,
        default=None,
        help="results/<gpu>_diet.json measured on the same machine, for the cost model",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: results/<gpu>.json, or results/<gpu>-<date-time>.json (never over a file)",
    )
    p.add_argument(
        "--trace-out",
        type=Path,
        default=None,
        help="default: results/traces/ with the same file name",
    )
    p.add_argument("--force", action="store_true", help="allow writing over an existing --out")
    args = p.parse_args(argv)
    unknown = [s for s in (args.sections or "").split(",") if s and s not in SECTIONS]
    if unknown:
        p.error(f"--sections {args.sections}: {', '.join(unknown)} not among {', '.join(SECTIONS)}")
    validate_outputs(p, args.force, {"--out": args.out, "--trace-out": args.trace_out})
    command = "python -m tinyllm.lab.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    record(args, command.strip())


if __name__ == "__main__":
    main()
