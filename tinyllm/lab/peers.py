"""The course's decode steps beside the tools a learner would reach for, timed alike, in one
run, on the same weights (notebooks 01 and 07, bench.py).

A Variant is a decode step ready to time: reset() puts it back at the operating point (a
32-token prompt just prefilled), step(tok) takes one decode step. measure() times every
variant in interleaved repeats (variant A, B, C, then A, B, C again, ...), so a slow
minute of the machine falls on all of them, and keeps each cell's median with its
min–max over the repeats. Eager steps are bound by the CPU and vary most: quote ranges.

The peers are run as their own documentation runs them: gpt-fast's recipe from
lab/gptfast/ (its Inductor settings, reduce-overhead, fullgraph), and torch.compile's
mode="reduce-overhead" on the course's own step as a user first writes it.
"""

import statistics
import time
from dataclasses import dataclass
from functools import partial

import torch

from tinyllm import GraphDecoder, KVCache
from tinyllm.generation import prefill
from tinyllm.lab import gptfast
from tinyllm.lab.timing import (
    host_times,
    kernel_summary,
    profile_steps,
    spread,
    step_times,
    traced_steps,
)
from tinyllm.precision import precision


@dataclass
class Variant:
    name: str
    reset: object  # () -> None: back to the operating point
    step: object  # (tok) -> logits (or what the peer returns)
    tok: torch.Tensor  # the token step takes, in the dtype the step wants
    setup_s: float  # compile and/or capture, from nothing to the first timed step


def _clock() -> float:
    """The host's clock, the GPU's queue drained first (where there is a GPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def eager(model, idx, attention_backends=None, name: str = "eager") -> Variant:
    """generate()'s step: the dynamic KVCache, one kernel launch per op, as
    generation.decode_step(check=False) runs it; with SDPA limited to attention_backends if
    given (default precision.ATTENTION_BACKENDS)."""
    state = {}

    def reset():
        state["cache"] = KVCache(model.cfg.n_layers)
        prefill(model, idx, state["cache"])

    @torch.no_grad()
    def step(tok):
        with precision(model, attention_backends):
            return model(tok, cache=state["cache"], check=False)[0]

    reset()
    return Variant(name, reset, step, idx[:, -1:].clone(), 0.0)


def step_variant(model, idx, mode: str) -> Variant:
    """The three ways to run the same decode step, by name: "eager" (generate()'s step),
    "static" (GraphDecoder(use_graph=False), the fixed-shape step run eagerly) and "graph"
    (the same step replayed from its bucketed graphs)."""
    if mode == "eager":
        return eager(model, idx)
    if mode not in ("static", "graph"):
        raise ValueError(f"mode must be 'eager', 'static' or 'graph', got {mode!r}")
    return decoder(model, idx, mode, use_graph=mode == "graph")


def decoder(model, idx, name: str, use_graph: bool = True, compile=False) -> Variant:
    """GraphDecoder's static step: run eagerly (use_graph=False), or replayed from its
    bucketed graphs, unfused or with fused kernels (compile=True or torch.compile
    arguments)."""
    t0 = _clock()
    dec = GraphDecoder(model, idx.shape[0], use_graph=use_graph, compile=compile)
    dec.prefill(idx)
    if use_graph:
        dec.capture()
    elif compile is not False:
        dec.step(idx[:, -1:], check=False)  # compile before the timer starts
    setup_s = _clock() - t0
    return Variant(
        name,
        partial(dec.prefill, idx),
        partial(dec.step, check=False),
        idx[:, -1:].clone(),
        setup_s,
    )


def reduce_overhead_first_try(model, idx) -> Variant:
    """torch.compile(model, mode="reduce-overhead") on the course's static step, as a user
    first writes it: no fullgraph, shapes left to Dynamo."""
    first_try = {"mode": "reduce-overhead", "dynamic": None, "fullgraph": False}
    t0 = _clock()
    dec = GraphDecoder(model, idx.shape[0], use_graph=False, compile=first_try)
    dec.prefill(idx)
    for _ in range(gptfast.WARMUP_CALLS):  # compile, warm up, record
        dec.step(idx[:, -1:], check=False)
    dec.prefill(idx)
    setup_s = _clock() - t0
    return Variant(
        "reduce-overhead, first try",
        partial(dec.prefill, idx),
        partial(dec.step, check=False),
        idx[:, -1:].clone(),
        setup_s,
    )


def gpt_fast(
    model,
    idx,
    max_new_tokens: int,
    forward_only: bool = False,
    static_tables: bool = False,
    extra=None,
) -> Variant:
    """gpt-fast's step (lab/gptfast): decode_one_token with its sampling, as generate.py runs
    it, or (forward_only) its model forward alone, which returns logits as the course's step
    does; static_tables: its RoPE table and mask at fixed addresses. Its cost does not depend
    on the position (it attends over its whole cache), so reset() leaves it where it is."""
    make = gptfast.make_forward_step if forward_only else gptfast.make_decode_step
    step, setup_s = make(
        model, idx, max_new_tokens, extra_inductor=extra, static_tables=static_tables
    )
    name = "gpt-fast" + (", forward only" if forward_only else "")
    name += ", static tables" if static_tables else ""
    name += "".join(f", {k}={v}" for k, v in (extra or {}).items())
    return Variant(name, lambda: None, step, idx[:, -1:].int(), setup_s)


REUSE_SETUP_S = 1.0  # compiling gpt-fast's step took 16-34 s on the H200; a reuse, hundredths


def reused_compile(rows: list[dict]) -> list[str]:
    """Names of the gpt-fast rows whose set-up took under REUSE_SETUP_S: too short to have
    compiled, so the build reused an earlier build's graph (the same function compiled twice,
    before gptfast.own_copy) and its own settings never applied. Its time is then that
    graph's again, not a measurement of its settings."""
    return [r["name"] for r in rows
            if r["name"].startswith("gpt-fast") and r["setup_s"] < REUSE_SETUP_S]  # fmt: skip


def strongest_gptfast(rows: list[dict]) -> dict:
    """gpt-fast in its strongest form with generate.py's own Inductor settings: the fastest
    of its rows (verbatim, static tables, forward only) without a setting generate.py lacks
    (those rows carry it as "name=value"), leaving out rows that reused another's compile."""
    reused = reused_compile(rows)
    return min((r for r in rows if r["name"].startswith("gpt-fast") and "=" not in r["name"]
                and r["name"] not in reused), key=lambda r: r["step_us"]["median"])  # fmt: skip


def skipped_cudagraphs() -> int:
    """How many times Inductor gave up a CUDA graph since the counters were cleared."""
    from torch._dynamo.utils import counters

    return sum(v for k, v in counters.get("inductor", {}).items() if "cudagraph_skip" in k)


def measure(
    variants: list[Variant],
    repeats: int = 5,
    n_steps: int = 40,
    warmup: int = 4,
    n_host: int = 8,
    keep_trace: bool = False,
) -> list[dict]:
    """Each variant's step time (µs, the median of each repeat's n_steps; median and min–max
    over the repeats), host time to issue a step, kernels per step, and set-up time. The
    repeats interleave the variants. keep_trace: also the profiled events of two steps."""
    per_repeat = {v.name: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            v.reset()
            per_repeat[v.name].append(statistics.median(step_times(v.step, v.tok, n_steps, warmup)))
    rows = []
    for v in variants:
        v.reset()
        host = statistics.median(host_times(v.step, v.tok, n_host))
        v.reset()
        trace = profile_steps(v.step, v.tok)
        k = kernel_summary(trace)
        rows.append(
            {
                "name": v.name,
                "step_us": spread(per_repeat[v.name]),
                "cpu_us": round(host, 1),
                "kernels": k["kernels"],
                "kernel_us": round(k["kernel_us"], 1),
                "setup_s": round(v.setup_s, 2),
            }
        )
        print("measured", rows[-1], flush=True)
        if keep_trace:
            rows[-1]["trace"] = [e for e in trace if e["step"] < 2]
    return rows


def fit_cost_model(points: list[dict]) -> dict:
    """Least squares µs = a + b·kernels over (kernels, step_us) points: b is what one more
    kernel adds on average, a what the line does not put down to the kernel count (the
    launch, and the few long kernels, GEMMs and attention, that cost more than b). Residuals
    per point, in µs."""
    xs = [p["kernels"] for p in points]
    ys = [p["step_us"] for p in points]
    if len(set(xs)) < 2:
        raise ValueError(f"a fit needs points with different kernel counts, got {sorted(xs)}")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    return {
        "a_us": round(a, 2),
        "b_us_per_kernel": round(b, 3),
        "residuals_us": {
            p["name"]: round(p["step_us"] - (a + b * p["kernels"]), 1) for p in points
        },
    }


def position_sweep(variant: Variant, n_positions: int, per: int = 1) -> list[float]:
    """µs of each step from the operating point on, one step per position, n_positions of
    them (so the bucketed graphs walk through every window); per > 1: the mean step of each
    `per` positions (timing.step_times)."""
    variant.reset()
    times = step_times(variant.step, variant.tok, n_positions, warmup=0, per=per)
    return [round(t, 2) for t in times]


def window_times(model, idx, repeats: int = 5, n_steps: int = 40) -> dict:
    """The replayed step time of each bucket's graph, at the same position (the operating
    point, where every window holds the keys): what a larger window costs."""
    dec = GraphDecoder(model, idx.shape[0])
    dec.prefill(idx)
    dec.capture()
    times = {w: [] for w in dec.buckets}
    for _ in range(repeats):
        for w in dec.buckets:
            dec.prefill(idx)  # every window replays from position 32
            run = lambda tok, w=w: dec.replay(w)  # noqa: E731
            times[w].append(statistics.median(step_times(run, idx[:, -1:], n_steps, warmup=2)))
    return {"windows": list(dec.buckets), "step_us": [spread(times[w]) for w in dec.buckets]}


def host_breakdown(variant: Variant, n_steps: int = 5, top: int = 25) -> dict:
    """Where the host's time goes in a step, from torch.profiler (timing.traced_steps): the
    step's whole host span and the events inside it (µs per step, summed by name, the top
    ones), e.g. Dynamo's guard check ("TorchDynamo Cache Lookup"), the compiled region, the
    graph launch (cudaGraphLaunch); and the step's kernel time on the GPU."""
    from collections import Counter

    variant.reset()
    events, spans = traced_steps(variant.step, variant.tok, n_steps)
    inside = lambda e: any(lo <= e["ts"] <= hi for lo, hi, _ in spans)  # noqa: E731
    host, gpu = Counter(), 0.0
    for e in events:
        if "dur" not in e or not inside(e) or e.get("name", "").startswith("decode_step_"):
            continue
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu += e["dur"]
        elif e.get("cat") in (
            "cpu_op",
            "user_annotation",
            "cuda_runtime",
            "cuda_driver",
            "python_function",
        ):
            host[e["name"][:80]] += e["dur"]
    per_step = lambda us: round(us / n_steps, 1)  # noqa: E731
    return {
        "host_step_us": per_step(sum(hi - lo for lo, hi, _ in spans)),
        "gpu_kernel_us": per_step(gpu),
        "host_events_us": {k: per_step(v) for k, v in host.most_common(top)},
    }


def host_categories(breakdown: dict) -> dict:
    """A host_breakdown() as what the host time pays for, µs per step: Dynamo's guards and
    cache lookup, copying inputs into the graph's static buffers, the graph launch, and the
    rest (Python, CUDAGraph Trees' bookkeeping, the ops outside the graph); and the GPU's
    kernel time beside them. The input copies are CUDAGraph Trees' one torch._foreach_copy_
    per replay, of every input not at a static address; an aten::copy_ is the step's own
    work (a clone, a cast) and counts with the rest."""
    ev = breakdown["host_events_us"]
    guards = ev.get("TorchDynamo Cache Lookup", 0.0)
    copies = ev.get("aten::_foreach_copy_", 0.0)
    launch = ev.get("cudaGraphLaunch", 0.0)
    host = breakdown["host_step_us"]
    return {
        "host_us": host,
        "guards": guards,
        "input copies": copies,
        "graph launch": launch,
        "other": max(0.0, host - guards - copies - launch),
        "gpu_kernel_us": breakdown["gpu_kernel_us"],
    }


def measure_sweep(model, built: dict, idx, bin_size: int = 16) -> dict:
    """Step time against position, 32 to max_len - 1, for the unfused and the fused bucketed
    graphs and for gpt-fast (forward only, static tables) with a cache of max_len
    positions: medians per bin of bin_size positions."""
    n = model.cfg.max_seq_len - 32
    gpt = gpt_fast(model, idx, n, forward_only=True, static_tables=True)
    out = {"positions": list(range(32, 32 + n, bin_size)), "bin_size": bin_size}
    for name, variant in (("graph", built["graph"]),
                          ("fused", built["fused kernels in bucketed graphs"]),
                          ("gpt-fast", gpt)):  # fmt: skip
        times = position_sweep(variant, n)
        out[f"{name}_us"] = [round(statistics.median(b), 1) for b in
                             (times[i : i + bin_size] for i in range(0, n, bin_size))]  # fmt: skip
    return out


def cost_model(rows: list[dict], diet: dict | None) -> dict:
    """µs = a + b·kernels over the steps whose time the GPU sets, at batch 1: the course's
    replayed graph rows and the diet's stages if given, with each point. gpt-fast's replayed
    steps stay out: Python runs between its replays (guards, CUDAGraph Trees' input copies,
    `host_breakdown`), so its host, not its kernels, sets part of its time."""
    replayed = [r for r in rows if r["name"] == "graph" or "graphs" in r["name"]]
    points = [{"name": r["name"], "kernels": r["kernels"], "step_us": r["step_us"]["median"]}
              for r in replayed]  # fmt: skip
    for stage in (diet or {}).get("stages", []):
        g = stage["batch"]["1"]["graph"]
        points.append({"name": f"diet {stage['stage']}", "kernels": g["kernels"],
                       "step_us": g["step_us"]["median"]})  # fmt: skip
    return {"points": points, "fit": fit_cost_model(points)}


# --- Hugging Face transformers: the peer a learner reaches for first (optional) --------------

# generate()'s fast path as HF's documentation gives it: the static cache, and the forward
# compiled with CompileConfig(fullgraph=True, mode="reduce-overhead")
HF_COMPILE = {"fullgraph": True, "mode": "reduce-overhead"}


def wall_s(fn) -> tuple[float, object]:
    """fn()'s seconds on the wall clock, the GPU's queue drained before and after."""
    t0 = _clock()
    out = fn()
    return _clock() - t0, out


def hf_generate_us(model, prompt: list[int], n_new: int = 256, compile: bool = True,
                   warm: int = 2, repeats: int = 3) -> dict:  # fmt: skip
    """HF generate() of the course's weights (lab.hf.to_hf) at batch 1, greedy, no eos, with
    the static cache and, compile=True, HF_COMPILE: µs per new token, the median and the
    least of `repeats` runs after `warm`, and the ids of the last run."""
    from tinyllm.lab.hf import require_transformers, to_hf

    transformers = require_transformers()
    hf = to_hf(model).eval()
    idx = torch.tensor([prompt], device=next(model.parameters()).device)
    kwargs = {"max_new_tokens": n_new, "do_sample": False, "cache_implementation": "static",
              "eos_token_id": None}  # fmt: skip
    if compile:
        kwargs["compile_config"] = transformers.CompileConfig(**HF_COMPILE)
    for _ in range(warm):
        hf.generate(idx, **kwargs)
    runs = [wall_s(lambda: hf.generate(idx, **kwargs)) for _ in range(repeats)]
    us = [s / n_new * 1e6 for s, _ in runs]
    return {"us_per_token": round(statistics.median(us), 1), "min": round(min(us), 1),
            "ids": runs[-1][1][0, len(prompt) :].tolist()}  # fmt: skip


def hf_continuous_batching(model, prompts: list[list[int]], news: list[int],
                           give_up_s: float = 240.0, **config) -> dict:  # fmt: skip
    """HF's continuous batching of the course's weights on a workload (each request its own
    max_new_tokens, greedy, no eos), through its documented manager
    (continuous_batching_context_manager, warmup=True), run twice in it: tok/s of each run
    and the second run's ids, in request order. config: ContinuousBatchingConfig's fields
    (HF's fast settings: use_cuda_graph=True, use_async_batching=True,
    default_compile_level=1). A run that has not ended after give_up_s raises TimeoutError,
    so that one setting cannot hold up the bench."""
    from tinyllm.lab.hf import require_transformers, to_hf

    transformers = require_transformers()
    hf = to_hf(model).eval()
    generation = transformers.GenerationConfig(do_sample=False, max_new_tokens=max(news),
                                               pad_token_id=hf.config.pad_token_id)  # fmt: skip
    batching = transformers.ContinuousBatchingConfig(**config)
    runs = []
    with hf.continuous_batching_context_manager(generation_config=generation, block=True,
                                                continuous_batching_config=batching,
                                                timeout=5, warmup=True) as manager:  # fmt: skip

        def serve() -> list[list[int]]:
            rids = [manager.add_request(p, max_new_tokens=n, eos_token_id=-1)
                    for p, n in zip(prompts, news)]  # fmt: skip
            done, give_up = {}, time.perf_counter() + give_up_s
            while len(done) < len(rids):
                if time.perf_counter() > give_up:
                    raise TimeoutError(f"{len(done)} of {len(rids)} requests in {give_up_s:g} s")
                r = manager.get_result(timeout=5)
                if r is not None and r.is_finished():
                    done[r.request_id] = r.generated_tokens
            return [done[rid] for rid in rids]

        runs = [wall_s(serve) for _ in range(2)]
    (first_s, _), (s, ids) = runs
    return {"tok_s": round(sum(news) / s, 1), "first_run_tok_s": round(sum(news) / first_s, 1),
            "ids": ids}  # fmt: skip
