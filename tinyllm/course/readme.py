"""The README's H200 section, written from results/h200.json (and h200_diet.json,
h200_paged.json, h200_engine.json) by `make images`, never by hand: tests/test_readme.py
checks that the README holds what this makes."""

import re
from pathlib import Path

from tinyllm.course.viz import engine as viz_engine
from tinyllm.course.viz.style import MIB, batch_index, sig3
from tinyllm.lab.pages import bin_spans
from tinyllm.lab.peers import reused_compile, strongest_gptfast

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- h200: begin (make images writes this) -->", "<!-- h200: end -->"


def us(cell: dict) -> str:
    """'183 µs (181–186 over 5 repeats)' from a {median, min, max, n} cell."""
    return (
        f"{sig3(cell['median'])} µs ({sig3(cell['min'])}–{sig3(cell['max'])} over "
        f"{cell['n']} repeats)"
    )


def h200_section(res: dict, diet: dict | None = None, paged: dict | None = None,
                 engine: dict | None = None, busy_events: dict | None = None,
                 engine_scale: dict | None = None, hf: dict | None = None) -> str:  # fmt: skip
    """The section's markdown: where the numbers come from, then one row per result."""
    p, h, op = res["provenance"], res["headline"], res["operating_point"]
    rows = {r["name"]: r for r in res["fusion"]["rows"]}
    cap, eng = res["capture"], res["engine"]
    exact, evs = res["bit_exact"], res["eager_vs_static"]
    busy_table = res["graph_busy_fraction"]
    busy = busy_table["fraction"][batch_index(busy_table, 1)]
    gpt = strongest_gptfast(res["fusion"]["rows"])
    reused = reused_compile(res["fusion"]["rows"])
    fused = h["fused_step_us"]
    lines = [
        f"From `results/h200.json` (`{p['command']}` on one {p['gpu']}, torch {p['torch']}, "
        f"{p['date']}, commit {p['commit']}{', with uncommitted changes' if p.get('dirty') else ''}"
        f"): the shipped {sig3(op['n_params'] / 1e6)} M-parameter model in "
        f"{op['dtype'].removeprefix('torch.')}, a "
        f"{op['prompt_len']}-token prompt, decode steps at positions {op['positions'][0]}-"
        f"{op['positions'][1]} (window {op['window']}), each cell the median of {op['repeats']} "
        f"interleaved repeats with their min–max.",
        "",
        "| | measured |",
        "| --- | --- |",
        f"| eager decode step, batch 1 | {us(rows['eager']['step_us'])}: "
        f"{rows['eager']['kernels']:.0f} kernels launched one by one |",
        f"| graph replay of the static step, batch 1 | {us(rows['graph']['step_us'])}, "
        f"{rows['graph']['kernels']:.0f} kernels in one launch: "
        f"{sig3(h['eager_step_us'] / h['graph_step_us'])}× faster |",
        f"| fused kernels in the bucketed graphs (the course's fastest step) | "
        f"{us(rows['fused kernels in bucketed graphs']['step_us'])}, {h['fused_kernels']:.0f} "
        f"kernels |",
        f"| gpt-fast's loop on this host, in its strongest form with its own settings "
        f"({gpt['name']}) | {us(gpt['step_us'])}, {gpt['kernels']:.0f} kernels: the course's "
        f"fused step takes {h['best_over_gptfast']:.2f}× its time (`best_over_gptfast`, a "
        f"ratio of host paths: the equal-footing rows are below) |",
        *(
            f"| gpt-fast with the course's extra setting too ({r['name']}) | {us(r['step_us'])}, "
            f"{r['kernels']:.0f} kernels: the fused step takes "
            f"{fused / r['step_us']['median']:.2f}× its time |"
            for n, r in rows.items()
            if n.startswith("gpt-fast") and "=" in n and n not in reused
        ),
        f"| GPU busy during a replayed step, batch 1 | {busy:.0%} (kernel time / step time) |",
        f"| bandwidth floor of a step (weights / copy bandwidth) | "
        f"{sig3(res['bandwidth']['floor_us'])} µs |",
        f"| capture of all {len(cap['windows'])} buckets | {sig3(cap['total_capture_s'])} s; one "
        f"shared pool {sig3(cap['shared_pool_bytes'] / MIB)} MiB vs "
        f"{sig3(cap['separate_pools_bytes'] / MIB)} MiB for a pool per graph |",
        f"| replay vs the same static step run eagerly | "
        f"{'bit-identical' if exact['all_equal'] else 'different'} at all {exact['steps']} steps "
        f"(batch {exact['batch']}, left-padded, {exact['requests']} requests, windows "
        f"{', '.join(map(str, exact['windows']))}) |",
        f"| eager `generate()` vs the static step | largest logit difference "
        f"{sig3(evs['max_logit_diff'])}; the same greedy token at "
        f"{evs['token_agreement']:.1%} of {evs['steps']} steps × {evs['batch']} rows |",
        f"| continuous batching, {eng['n_slots']} slots, {eng['n_requests']} requests | "
        f"{sig3(eng['graph_tok_s'])} tokens/s with graphs vs {sig3(eng['eager_tok_s'])} "
        f"eagerly ({sig3(eng['speedup'])}×) |",
        f"| the eager step with cuDNN attention allowed | "
        f"{sig3(res['eager_with_cudnn_attention']['step_us'])} µs (timed in a section of its "
        f"own): the package leaves cuDNN attention out (a plan per key length is the cause "
        f"PyTorch's references give; notebook 02) |",
    ]
    if diet:
        first, last = (
            diet["stages"][0]["batch"]["1"]["graph"],
            diet["stages"][-1]["batch"]["1"]["graph"],
        )
        lines.append(
            f"| the kernel diet (`results/h200_diet.json`), graph replay at batch 1 | "
            f"{first['kernels']:.0f} → {last['kernels']:.0f} kernels, "
            f"{sig3(first['step_us']['median'])} → {sig3(last['step_us']['median'])} µs in "
            f"{len(diet['stages']) - 1} steps, from stage {diet['stages'][0]['stage']} to "
            f"{diet['stages'][-1]['stage']} |"
        )
    if reused:
        lines += [
            "",
            f"Not in the table: {', '.join(f'`{n}`' for n in reused)}. Their set-up took "
            f"under a second, too short to compile: each reused an earlier build's compiled "
            f"step, so its settings never applied and its time is not theirs (the bench "
            f"compiles every build anew since).",
        ]
    if paged:
        lines += ["", *paged_section(paged)]
    if engine:
        lines += ["", *engine_section(engine, busy_events)]
    if engine_scale:
        lines += ["", *scale_section(engine_scale)]
    if hf:
        lines += ["", *hf_section(hf)]
    return "\n".join(lines)


def step_name(row: str) -> str:
    """A row of the paged recording as the table names it: 'gpt-fast, ideal host, X' is
    gpt-fast's compiled forward with generate.py's settings and X."""
    name = row.replace(", ideal host", "")
    if name.startswith("gpt-fast"):
        extra = name.removeprefix("gpt-fast").removeprefix(", ")
        return "gpt-fast's compiled forward, generate.py's settings" + (
            f" and `{extra}`" if extra else ""
        )
    return f"the course's {name} step" if name in ("graph", "paged", "paged fused") else name


def paged_section(rec: dict) -> list[str]:
    """The paged recording's lines: every step replayed from a graph with one token copy per
    step (an ideal host), gpt-fast's compiled forward among them; the attention call; the
    paged step against position; capture; replay against the eager paged step."""
    p, pg, h = rec["provenance"], rec["paged"], rec["headline"]
    rows = {r["name"]: r for r in pg["rows"]}
    extra = ", ".join(f"{k}={v}" for k, v in pg["gpt_fast_extra"].items())
    att, cap, ex = pg["attention"], pg["capture"], pg["exactness"]
    lo, hi = pg["positions"]
    short, long = bin_spans(pg["sweep"])  # the positions paged_long_over_short's bins cover
    lines = [
        f"Pages and peers on equal footing, from `results/h200_paged.json` (`{p['command']}` "
        f"on one {p['gpu']}, torch {p['torch']}, {p['date']}, commit {p['commit']}"
        f"{', with uncommitted changes' if p.get('dirty') else ''}; {p['note']}): "
        f"batch {pg['batch']}, "
        f"decode steps at positions {lo}-{hi}, every step replayed from a hand-captured graph "
        f"with one token copy per step (an ideal host: launches cost nothing), gpt-fast's "
        f"cache sized as its generate.py sizes it ({pg['gpt_fast_cache']} positions).",
        "",
        "| on an ideal host | measured |",
        "| --- | --- |",
        *(
            f"| {step_name(name)} | {us(r['step_us'])}, {r['kernels']:.0f} kernels |"
            for name, r in rows.items()
        ),
        f"| the course's fused bucketed step over gpt-fast with `{extra}` | "
        f"{h['fused_over_gptfast_ideal']:.3f}× (`fused_over_gptfast_ideal`) |",
        f"| the paged fused step over gpt-fast with `{extra}` | "
        f"{h['paged_over_gptfast_ideal']:.3f}× (`paged_over_gptfast_ideal`) |",
        f"| the paged fused step at positions {long} over positions {short} | "
        f"{h['paged_long_over_short']:.3f}× (`paged_long_over_short`) |",
        *(
            f"| one attention call, batch {b}, at {', '.join(map(str, att['lengths']))} keys "
            f"(a graph of {att['calls']} calls, launched behind a replay before it) | "
            f"the paged kernel {' / '.join(f'{t:g}' for t in att[b]['paged_kernel_us'])} µs; "
            + (
                f"the fused op, `rope_write_attend` (the step's attention kernel and its "
                f"combine, in the step's table), "
                f"{' / '.join(f'{t:g}' for t in att[b]['fused_op_us'])} µs; "
                if "fused_op_us" in att[b]
                else ""
            )
            + f"SDPA over the window {' / '.join(f'{t:g}' for t in att[b]['sdpa_window_us'])} µs |"
            for b in ("1", "8")
            if b in att
        ),
        f"| capture of the paged graphs, capture sizes "
        f"{', '.join(map(str, cap['capture_sizes']))} ({cap['n_slots']} slots) | "
        f"{sig3(cap['paged']['capture_s'])} s, one pool of "
        f"{sig3(cap['paged']['pool_bytes'] / MIB)} MiB |",
        f"| paged replay vs the same paged step run eagerly | "
        f"{'bit-identical' if ex['all_equal'] else 'different'} at all {ex['steps']} steps "
        f"(batches {', '.join(map(str, ex['batches']))}); greedy tokens equal to the windowed "
        f"path's at {ex['greedy_agreement_with_windowed']:.1%} |",
    ]
    return lines


ENGINE_NAMES = {  # lab.engine_time.ENGINES, as the table names them
    "slots": "the slot engine (notebook 06)",
    "paged": "paged: prefill in batches, sampling in the step, ids read a step late",
    "paged_prefill_graphs": "paged, and the prefill replayed from graphs",
    "paged_overlap": "paged, prefill graphs, and the host overlapped (`overlap=True`)",
}


def engine_section(rec: dict, busy: dict | None = None) -> list[str]:
    """The engine recording's lines: each engine's tokens/s and where its host time goes at
    32 slots, the paged engine's rows at 32 and 8 slots (engine_paged), capture; with busy
    (results/h200_busy_events.json), the busy share measured without the profiler."""
    p, ep, eng = rec["provenance"], rec["engine_paged"], rec["engine"]
    d32 = ep["detail"]["32"]
    lines = [
        f"The engine around the graph, from `results/h200_engine.json` (`{p['command']}` on "
        f"one {p['gpu']}, torch {p['torch']}, {p['date']}, commit {p['commit']}"
        f"{', with uncommitted changes' if p.get('dirty') else ''}; {p['note']}): the "
        f"bench's engine workload ({d32['n_requests']} requests, {d32['n_tokens']} tokens), "
        f"every engine with graphs, in one run. Host sections from the engine's own records "
        f"(admission, launch, read ids, the rest); GPU busy: {ep['gpu_busy_share']}.",
        "",
        "| engine, 32 rows | tokens/s | admission / launch / read ids / other host | GPU busy |",
        "| --- | --- | --- | --- |",
        *(
            f"| {ENGINE_NAMES.get(name, name)} | {sig3(r['tok_s'])} | "
            f"{' / '.join(f'{v:.0%}' for v in r['sections'].values())} | "
            f"{format(r['gpu_busy_share'], '.0%') if 'gpu_busy_share' in r else 'not profiled'} |"
            for name, r in d32.items()
            if isinstance(r, dict)
        ),
        "",
        "| `engine_paged` | tokens/s | over the graphed slot engine | GPU busy |",
        "| --- | --- | --- | --- |",
        *(
            f"| {r['n_slots']} rows | {sig3(r['tok_s'])} | {r['speedup_over_slots']:.2f}× "
            f"(`speedup_over_slots`) | {r['gpu_busy_share']:.0%} |"
            for r in ep["rows"]
        ),
        f"| `capture()` of every graph, 32 rows | {sig3(d32['paged_overlap']['capture_s'])} s "
        f"with the prefill graphs (`paged_overlap`); {sig3(d32['paged']['capture_s'])} s for "
        f"the decode graphs alone (`paged`, the run's first engine, Triton's compile "
        f"included) |",
        f"| tokens with `overlap=True` and `overlap=False` | "
        f"{'identical' if d32['overlap_tokens_identical'] else 'different'} |",
        f"| the slot engine in the same run's `engine` section, eager and with graphs | "
        f"{sig3(eng['eager_tok_s'])} and {sig3(eng['graph_tok_s'])} tokens/s "
        f"({sig3(eng['speedup'])}×; host-bound runs, which move between sections) |",
        *(
            f"| GPU busy under the profiler, {r['n_slots']} rows | "
            f"{r['gpu_busy_share']:.0%} of a run the profiler slowed to "
            f"{sig3(ep['detail'][str(r['n_slots'])]['paged_overlap']['profiled_tok_s'])} "
            f"tokens/s |"
            for r in ep["rows"]
        ),
    ]
    if busy:
        b, rows = busy["provenance"], [r for r in busy["rows"] if r["engine"] == "paged_overlap"]
        lines += [
            "",
            f"The GPU busy share without the profiler, from `results/h200_busy_events.json` "
            f"(`{b['command']}`, {b['date']}, commit {b['commit']}): {busy['method']}",
            "",
            "| paged engine, `overlap=True` | tokens/s | GPU busy (CUDA events) |",
            "| --- | --- | --- |",
            *(
                f"| {r['n_slots']} rows | {sig3(r['tok_s'])} | {r['gpu_busy_share']:.0%} |"
                for r in rows
            ),
        ]
    return lines


def scale_section(rec: dict) -> list[str]:
    """The paged engine at 1 to 256 rows (results/h200_engine_scale.json, one bench run,
    each engine in a process of its own): tokens/s, the host's time per step beside the
    all-rows graph replayed alone, GPU busy; the spread of the repeated runs; min_admit=1 and
    compile=True at the sizes they ran."""
    p = rec["provenance"]
    lines = [
        f"The paged engine at scale, from `results/h200_engine_scale.json` (`{p['command']}`, "
        f"{p['gpu']}, torch {p['torch']}, {p['date']}, commit {p['commit']}): "
        f"`PagedEngine(overlap=True)` after `capture()`, on the bench's request distribution, "
        f"each run in a process of its own. Host time per step: {rec['host_us_per_step']}. "
        f"GPU busy: {rec['gpu_busy_share']}.",
        "",
        "| rows | requests | tokens/s | first run | host per step (median) | the all-rows "
        "graph replayed alone | GPU busy | capture |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *(
            f"| {r['n_rows']} | {r['n_requests']} | {sig3(r['tok_s'])} | "
            f"{sig3(r['first_run_tok_s'])} | {sig3(r['host_us_per_step'])} µs | "
            f"{sig3(r['replay_alone_us'])} µs | {r['gpu_busy_share']:.0%} | "
            f"{sig3(r['capture_s'])} s |"
            for r in rec["rows"]
        ),
        "",
        "Each engine at the sizes run more than once, each run's min to max (the default "
        "engine: its run above and the repeats):",
        "",
        "| rows | engine | runs | tokens/s | host per step (median) | host over the replay "
        "alone | GPU busy | capture and compile |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, runs in viz_engine.scale_groups(rec).items():
        for n in sorted({r["n_rows"] for r in runs}):
            at = [r for r in runs if r["n_rows"] == n]

            def span(key, fmt, at=at):
                values = [key(r) for r in at]
                low, high = fmt(min(values)), fmt(max(values))
                return low if low == high else f"{low} to {high}"

            lines.append(
                f"| {n} | {name} | {len(at)} | {span(lambda r: r['tok_s'], sig3)} | "
                f"{span(lambda r: r['host_us_per_step'], sig3)} µs | "
                f"{span(lambda r: r['host_us_per_step'] / r['replay_alone_us'], '{:.2f}'.format)}"
                f" | {span(lambda r: r['gpu_busy_share'], '{:.0%}'.format)} | "
                f"{span(lambda r: r['capture_and_compile_s'], sig3)} s |"
            )
    return lines


def hf_section(rec: dict) -> list[str]:
    """Hugging Face transformers beside the course on the same weights, and graphs against
    eager from 3 M to 1.5 B parameters (results/h200_hf.json)."""
    p = rec["provenance"]
    gen, eng, sizes = rec["generate"], rec["engine"], rec["sizes"]
    return [
        f"Hugging Face transformers {p['transformers']} beside the course, from "
        f"`results/h200_hf.json` (`{p['command']}`, {p['gpu']}, torch {p['torch']}, "
        f"{p['date']}, commit {p['commit']}"
        + (f"; {p['note']}" if "note" in p else "")
        + f"). generate(): {gen['what']}. The "
        f"engines: {eng['what']}.",
        "",
        "| | µs per token | tokens/s | greedy tokens equal to the course engine's |",
        "| --- | --- | --- | --- |",
        *(f"| {r['name']} | {sig3(r['us_per_token'])} µs | | |" for r in gen["rows"]),
        *(
            f"| {r['name']} | | "
            + (f"{sig3(r['tok_s'])} |" if "tok_s" in r else f"{r['error']} |")
            + (
                f" {r['greedy_share_equal_course']:.0%} |"
                if "greedy_share_equal_course" in r
                else " |"
            )  # fmt: skip
            for r in eng["rows"]
        ),
        "",
        f"Graphs against eager as the model grows: {sizes['what']}.",
        "",
        "| configuration | parameters | with graphs | eager | graphs' gain | bandwidth floor |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {r['name']} | {sig3(r['params'] / 1e6)} M | {sig3(r['graph_us'])} µs | "
            f"{sig3(r['eager_us'])} µs | {r['graph_gain']:.1f}× | {sig3(r['floor_us'])} µs |"
            for r in sizes["rows"]
        ),
    ]


def update_readme(
    res: dict, diet: dict | None = None, paged: dict | None = None,
    engine: dict | None = None, busy_events: dict | None = None,
    engine_scale: dict | None = None, hf: dict | None = None, path: Path = README,
) -> bool:  # fmt: skip
    """Rewrite the README's H200 section between its markers; True if it changed."""
    text = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path} has no section between {BEGIN!r} and {END!r}")
    section = h200_section(res, diet, paged, engine, busy_events, engine_scale, hf)
    new = pattern.sub(lambda m: f"{BEGIN}\n{section}\n{END}", text)
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    from tinyllm.lab import results as r

    recorded = r.load_results(), r.load_diet(), r.load_paged(), r.load_engine()
    changed = update_readme(*recorded, r.load_busy_events(), r.load_engine_scale(), r.load_hf())
    print("README updated" if changed else "README unchanged")
