"""Interactive explorers for the notebooks, built on viz.

Each explorer shows itself and returns its widget (an ipywidgets `interactive`): end the
cell with `mask_explorer();` or assign it, `w = mask_explorer()`, so it is not shown twice.
`w.result` holds what the last update computed, which the tests read.

Sliders update on release (continuous_update=False): each update redraws a figure. Only
what was measured is offered (recorded batches, recorded windows), and what is pure
arithmetic (bucket lists, masks) is computed; nothing is extrapolated.
"""

import ipywidgets as W
from IPython.display import display

from tinyllm.course.viz import (
    MIB,
    bucket_figure,
    cpu_gpu_figure,
    engine_variants,
    late_read_figure,
    late_read_schedule,
    mask_figure,
    overlap_timeline_figure,
    pages_figure,
    pages_scene,
    slot_timeline_figure,
    timeline_figure,
)
from tinyllm.graphs import bucket_for, default_buckets, wasted_share
from tinyllm.kv_cache import window_mask
from tinyllm.lab.engine_time import workload
from tinyllm.lab.results import capture_cost, provenance_label
from tinyllm.serve import PagedEngine


def _slider(cls, value, lo, hi, description, step=1):
    """A slider from lo to hi that starts at value: a value outside is refused, never clamped
    without a word."""
    ends = value if isinstance(value, tuple) else (value,)  # a range slider's two ends
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi
           for v in ends):  # fmt: skip
        raise ValueError(f"{description}: {value!r} is outside the slider's [{lo}, {hi}]")
    return cls(
        value=value,
        min=lo,
        max=hi,
        step=step,
        description=description,
        continuous_update=False,
        style={"description_width": "initial"},
    )


def _show(f, **controls) -> W.interactive:
    w = W.interactive(f, **controls)
    display(w)
    return w


def mask_explorer(batch_pads=(0, 3, 5), window: int = 16, max_pos: int | None = None):
    """StaticKVCache's decode mask: move the position, pick a window (or let the smallest
    bucket that fits be chosen) and change each row's left pads."""
    max_pos = max_pos or 4 * window - 1
    buckets = default_buckets(max_pos + 1, first=window)
    auto = "smallest bucket that fits"

    def show(pos, bucket, **pads):
        first_valid = [pads[f"pad_{b}"] for b in range(len(batch_pads))]
        w = bucket_for(pos + 1, buckets) if bucket == auto else bucket
        if pos >= w:
            print(
                f"Position {pos} needs {pos + 1} keys > window {w}: the decoder would use "
                f"bucket {bucket_for(pos + 1, buckets)}."
            )
            return None
        if max(first_valid) >= pos:
            print(
                f"A row with {max(first_valid)} pads has no prompt token before position "
                f"{pos}: a real prompt has at least one token after its pads."
            )
            return None
        mask = window_mask(pos, w, first_valid)
        display(mask_figure(mask, pos, first_valid))
        return mask

    pads = {
        f"pad_{b}": _slider(W.IntSlider, p, 0, max_pos - 1, f"row {b} pads")
        for b, p in enumerate(batch_pads)
    }
    start = min(max_pos, max(batch_pads) + 4)
    return _show(
        show,
        pos=_slider(W.IntSlider, start, 1, max_pos, "position"),
        bucket=W.Dropdown(
            options=[auto, *buckets],
            value=auto,
            description="window",
            style={"description_width": "initial"},
        ),
        **pads,
    )


def bucket_explorer(res: dict | None = None, max_seq_len: int = 1024):
    """Buckets from (first, growth, max_len): the graphs to capture, the wasted attention
    work, and (if res has capture data) the recorded cost of capturing them."""

    def show(first, growth, max_len):
        buckets = default_buckets(max_len, first, growth)
        summary = {
            "buckets": buckets,
            "n_graphs": len(buckets),
            "wasted_share": wasted_share(buckets, max_len),
        }
        print(
            f"buckets {buckets}: {len(buckets)} graphs to capture, "
            f"{summary['wasted_share']:.1%} of attention work on masked keys"
        )
        if res is not None and "capture" in res:
            cost = summary["capture"] = capture_cost(res, buckets)
            if cost["measured"]:
                print(
                    f"Windows {cost['measured']}: {cost['capture_s'] * 1e3:.3g} ms to capture,\n"
                    f"{cost['pool_bytes'] / MIB:.3g} MiB of pool memory, summed from the\n"
                    f"recorded per-window measurements (batch 1, each graph in its own pool;\n"
                    f"{provenance_label(res)})."
                )
            if cost["not_measured"]:
                print(f"Windows {cost['not_measured']} were not measured.")
        display(bucket_figure(buckets, max_len))
        return summary

    return _show(
        show,
        first=_slider(W.IntSlider, 128, 16, 512, "first bucket", step=16),
        growth=_slider(W.FloatSlider, 2.0, 1.25, 4.0, "growth", step=0.25),
        max_len=_slider(W.IntSlider, max_seq_len, 64, max_seq_len, "max_len", step=32),
    )


def timing_explorer(res: dict, trace: dict):
    """CPU issue time vs GPU kernel time, and the profiled timeline, at a recorded batch."""
    batches = [
        b
        for b in res["cpu_time"]["batch"]
        if b in res["gpu_kernel_time"]["batch"] and str(b) in trace["batch"]
    ]
    if not batches:
        raise ValueError("no batch size has both recorded timings and a trace")
    n_steps = min(
        len({e["step"] for e in events})
        for b in batches
        for events in trace["batch"][str(b)].values()
    )

    def show(batch, rows, steps):
        methods = ("eager", "graph") if rows == "both" else (rows,)
        figs = cpu_gpu_figure(res, batch), timeline_figure(trace, batch, steps, methods)
        print(provenance_label(res))
        for fig in figs:
            display(fig)
        return figs

    style = {"description_width": "initial"}
    return _show(
        show,
        batch=W.Dropdown(options=batches, value=batches[0], description="batch", style=style),
        rows=W.ToggleButtons(
            options=["both", "eager", "graph"], description="timeline", style=style
        ),
        steps=_slider(W.IntSlider, 1, 1, n_steps, "steps"),
    )


def slot_timeline_explorer(stats: list[dict], n_slots: int):
    """The engine's slot timeline over a chosen range of decode steps."""
    if not stats:
        raise ValueError("stats is empty: run the engine first")
    first, last = stats[0]["step"], stats[-1]["step"]

    def show(steps):
        fig = slot_timeline_figure([s for s in stats if steps[0] <= s["step"] <= steps[1]], n_slots)
        display(fig)
        return fig

    return _show(show, steps=_slider(W.IntRangeSlider, (first, last), first, last, "steps"))


def pages_explorer(prompt_lens=(5, 9, 3), max_len: int = 32):
    """The paged cache's host changes on the book's PagedKVCache (viz.pages_scene): admit rows
    with their prompts, take decode steps, release a row, compact; the block table and the
    pool after them. Prompts and steps go up to max_len / 2 each, so no row passes max_len."""

    def show(block_size, steps, release, compact, **lens):
        lengths = [lens[f"len_{r}"] for r in range(len(prompt_lens))]
        scene = pages_scene(lengths, block_size, steps, None if release == "none" else release,
                            compact, max_len)  # fmt: skip
        print(
            f"lens {scene['lens']} (lens_dev {scene['lens_dev']}); blocks per row "
            f"{[len(t) for t in scene['tables']]}; free list {scene['free']}"
        )
        display(pages_figure(scene))
        return scene

    style = {"description_width": "initial"}
    lens = {
        f"len_{r}": _slider(W.IntSlider, n, 0, max_len // 2, f"row {r} prompt (0: free)")
        for r, n in enumerate(prompt_lens)
    }
    return _show(
        show,
        block_size=W.Dropdown(options=[2, 4, 8], value=4, description="block_size", style=style),
        steps=_slider(W.IntSlider, 0, 0, max_len // 2, "decode steps"),
        release=W.Dropdown(
            options=["none", *range(len(prompt_lens))],
            value="none",
            description="then release row",
            style=style,
        ),
        compact=W.Checkbox(value=False, description="then compact", style=style),
        **lens,
    )


def engine_explorer(rec: dict):
    """The recorded engine runs (results/<gpu>_engine.json, engine_paged): pick a recorded
    number of rows (n_slots in the recording) and an engine variant; its tok/s, GPU busy
    share and host sections, and its profiled window (host and GPU lanes). Only the recorded
    settings are offered."""
    detail = rec["engine_paged"]["detail"]
    sizes = sorted(detail, key=int, reverse=True)
    variants = engine_variants(detail[sizes[0]])

    def show(n_rows, variant):
        row = detail[n_rows][variant]
        sections = ", ".join(f"{k} {v:.0%}" for k, v in row["sections"].items())
        print(f"{variant}, {n_rows} rows, the timed run: {row['tok_s']:.0f} tok/s; "
              f"wall time: {sections}")  # fmt: skip
        if "gpu_busy_share" in row:
            print(f"a profiled run of it: GPU busy {row['gpu_busy_share']:.0%} of a run the "
                  f"profiler slowed to {row['profiled_tok_s']:.0f} tok/s")  # fmt: skip
        print(provenance_label(rec))
        if "timeline" in row:
            display(overlap_timeline_figure(rec, n_rows, [variant]))
        else:
            print("(not profiled in this recording: no host and GPU lanes to draw)")
        return {"n_rows": n_rows, "variant": variant, **row}

    style = {"description_width": "initial"}
    return _show(
        show,
        n_rows=W.Dropdown(options=sizes, value=sizes[0], description="rows", style=style),
        variant=W.ToggleButtons(
            options=variants, value=variants[-1], description="engine", style=style
        ),  # fmt: skip
    )


def late_read_explorer(launch_us: int = 30, host_us: int = 50, gpu_us: int = 100):
    """PagedEngine's turns as a model (viz.late_read_schedule), not a measurement: set the
    host's launch of a step, its other work in a turn, and the GPU's step; both schedules,
    overlap=False and True, are drawn, and each one's turn and GPU busy share printed. Pure
    arithmetic."""

    def show(launch, host, gpu):
        out = {}
        for overlap in (False, True):
            sc = late_read_schedule(host, gpu, overlap, launch_us=launch)
            print(f"overlap={overlap!s:5s}: a turn every {sc['period']:.0f} µs, GPU busy "
                  f"{sc['busy']:.0%}")  # fmt: skip
            out[overlap] = sc
        display(late_read_figure(host, gpu, launch_us=launch))
        return out

    return _show(
        show,
        launch=_slider(W.IntSlider, launch_us, 10, 1000, "launch (µs)", step=10),
        host=_slider(W.IntSlider, host_us, 10, 1000, "hand out and admit (µs)", step=10),
        gpu=_slider(W.IntSlider, gpu_us, 10, 1000, "GPU step (µs)", step=10),
    )


def admission_explorer(model, n_rows: int = 16, n_requests: int = 48):
    """PagedEngine's min_admit, live: the bench's workload (engine_time.workload), cut short
    for a CPU, served eagerly through n_rows rows at the min_admit picked. Prints the
    admissions (one prefill each), the decode steps and the rows a step ran on average:
    counts, the same on any machine."""
    prompts, news = workload(n_requests, seed=0)
    prompts, news = [p[:16] for p in prompts], [n // 16 for n in news]  # 2-16 new tokens

    def show(min_admit):
        engine = PagedEngine(model, n_rows, max_len=64, use_graph=False, min_admit=min_admit)
        for prompt, n in zip(prompts, news):
            engine.submit(prompt, n)
        engine.run()
        steps = engine.stats
        rows_a_step = sum(s["n_active"] for s in steps) / len(steps)
        out = {"min_admit": min_admit, "admissions": len(engine.admissions),
               "steps": len(steps), "rows_a_step": rows_a_step}  # fmt: skip
        print(f"{n_requests} requests through {n_rows} rows, min_admit {min_admit}: "
              f"{out['admissions']} admissions, {out['steps']} decode steps, "
              f"{out['rows_a_step']:.1f} rows a step on average")  # fmt: skip
        return out

    return _show(show, min_admit=_slider(W.IntSlider, 1, 1, n_rows, "min_admit"))


def floor_explorer(floor: dict, paged: dict):
    """Notebook 11: pick a recorded step (paged's steps on equal footing) and a way of
    launching a node (floor's three lines): the floor of the step's kernels, kernels × µs a
    node, against its recorded time. Pure arithmetic on two recordings."""
    steps = {r["name"]: r for r in paged["paged"]["rows"]}
    ways = [w for w in ("triton", "torch add_", "triton, PDL") if w in floor]

    def show(step, way):
        r, per = steps[step], floor[way]["us_per_node"]
        us, k = r["step_us"]["median"], r["kernels"]
        at_floor = k * per
        print(f"{step}: {us} µs a step, {k} kernels")
        print(f"at {per} µs a node ({way}), its kernels' floor is {at_floor:.1f} µs, "
              f"{at_floor / us:.0%} of the step")  # fmt: skip
        return {"step_us": us, "kernels": k, "floor_us": at_floor}

    return _show(show, step=W.Dropdown(options=list(steps), value=list(steps)[-1],
                                       description="step", style={"description_width": "initial"}),
                 way=W.ToggleButtons(options=ways, description="node",
                                     style={"description_width": "initial"}))  # fmt: skip
