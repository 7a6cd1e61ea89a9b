"""Where a graphed engine's time goes (notebook 09): the host's sections of a run, the host
and GPU lanes of a recorded window, the paged engine's host and replay at 1 to 256 rows, the
capture presets' padding and graphs; and the live counts the notebook shows beside them
(prefill forwards, the ops of one forward).

The recordings are results/h200_engine.json (its "engine_paged" block, written by the bench
through tinyllm.lab.engine_time), results/h200_engine_scale.json and
results/h200_capture_policy.json; every number a title states is computed from the data
drawn. The engine variants are taken in
engine_time.ENGINES order, then any other variant a recording holds, so a recording with one
more variant draws it without a change here.
"""

from matplotlib.patches import Patch

from tinyllm.course.viz.style import MIB, label_source, new_figure, sig3
from tinyllm.lab.engine_time import ENGINES, SECTIONS

SECTION_COLORS = {
    "admission": "#E69F00",  # orange
    "launch": "#0072B2",  # blue
    "read ids": "#D55E00",  # vermillion
    "other host": "#999999",  # grey
    "gpu": "#009E73",  # bluish green: the GPU busy
}
HOST_LANES = ("admission", "launch", "read ids")


def engine_variants(detail: dict) -> list[str]:
    """The engine variants recorded in one n_slots block of engine_paged.detail (or any
    {name: row} dict whose rows have "sections"), in ENGINES order, then the others."""
    rows = [k for k, v in detail.items() if isinstance(v, dict) and "sections" in v]
    return [k for k in ENGINES if k in rows] + [k for k in rows if k not in ENGINES]


def recorded_groups(rec: dict) -> dict[str, dict[str, dict]]:
    """engine_paged.detail of a recording as {"<n> rows": {variant: row}}, most rows first (the
    recording keys each run by n_slots, its number of rows)."""
    detail = rec["engine_paged"]["detail"]
    order = sorted(detail, key=lambda k: -int(k))
    return {f"{k} rows": {v: detail[k][v] for v in engine_variants(detail[k])} for k in order}


def each_change_cuts_the_largest(rows: dict[str, dict]) -> bool:
    """Does each variant, in order, hold a smaller share of the section that was the largest of
    the variant before it? rows: {variant: row}, as one group of recorded_groups."""
    names = engine_variants(rows)
    for before, after in zip(names, names[1:]):
        shares = rows[before]["sections"]
        top = max(shares, key=shares.get)
        if rows[after]["sections"][top] >= shares[top]:
            return False
    return True


def sections_figure(groups: dict[str, dict[str, dict]], recording: dict | None = None,
                    title: str | None = None, rates: bool = True):  # fmt: skip
    """One panel per group ({label: {variant: row}}), one stacked bar per variant: each of
    SECTIONS' share of the run's wall time (row["sections"]), and above it the row's tok/s
    (rates=False: none, for runs whose rates mean nothing, as a CPU's simulated graphs).
    One kind of run only: the timed runs (a profiled run's GPU busy share is another run, shown
    apart). The title says what the data shows, unless given."""
    fig, axes = new_figure(1, len(groups), figsize=(4.2 * len(groups) + 0.6, 3.8), squeeze=False)
    for ax, (label, rows) in zip(axes[0], groups.items()):
        names = engine_variants(rows)
        for i, name in enumerate(names):
            row, bottom = rows[name], 0.0
            for s in SECTIONS:
                share = max(0.0, row["sections"].get(s, 0.0))
                ax.bar(i, 100 * share, bottom=100 * bottom, color=SECTION_COLORS[s], width=0.6)
                bottom += share
            text = f"{sig3(row['tok_s'])} tok/s" if rates and "tok_s" in row else ""
            ax.text(i, 100 * bottom + 2, text, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=8)
        ax.set(ylim=(0, 145), ylabel="share of the run's wall time (%)", xlabel=label)
        ax.set_yticks(range(0, 101, 20))  # above 100: room for the rates and the legend
    handles = [Patch(color=SECTION_COLORS[s], label=s) for s in SECTIONS]
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper center", ncols=4)
    if title is None:
        label, rows = next(iter(groups.items()))
        names = engine_variants(rows)
        first, last = rows[names[0]]["tok_s"], rows[names[-1]]["tok_s"]
        if all(each_change_cuts_the_largest(r) for r in groups.values()):
            title = "Each improvement cuts the host's largest section"
        else:
            title = "The host's sections of the wall time, improvement by improvement"
        title += f": {sig3(first)} to {sig3(last)} tok/s at {label}"
    fig.suptitle(title, fontsize=10)
    return label_source(fig, recording)


def timeline_window(rec: dict, n_slots: str, variant: str) -> dict:
    """The recorded window of one variant: {"window_us", "host": {lane: spans}, "gpu": spans}."""
    return rec["engine_paged"]["detail"][str(n_slots)][variant]["timeline"]


def busy_us(spans) -> float:
    """Total length of (start, end) spans that do not overlap (a recorded lane)."""
    return sum(b - a for a, b in spans)


def overlap_timeline_figure(rec: dict, n_slots: str = "8", variants=None):
    """The recorded window of each variant (default: every profiled one, those with a
    timeline) as two lanes, the host's sections above and the GPU's busy intervals below,
    µs from the window's start. The title gives each variant's GPU busy share inside the
    window drawn."""
    detail = rec["engine_paged"]["detail"][str(n_slots)]
    variants = variants or [v for v in engine_variants(detail) if "timeline" in detail[v]]
    fig, axes = new_figure(len(variants), 1, figsize=(8, 1.5 + 1.1 * len(variants)),
                           squeeze=False, sharex=True)  # fmt: skip
    shares = []
    for ax, name in zip(axes[:, 0], variants):
        tl = detail[name]["timeline"]
        for lane in HOST_LANES:
            spans = [(a, b - a) for a, b in tl["host"].get(lane, [])]
            ax.broken_barh(spans, (1.1, 0.8), color=SECTION_COLORS[lane])
        ax.broken_barh([(a, b - a) for a, b in tl["gpu"]], (0.1, 0.8), color=SECTION_COLORS["gpu"])
        share = busy_us(tl["gpu"]) / tl["window_us"]
        shares.append(f"{name} {share:.0%}")
        ax.set(yticks=[0.5, 1.5], yticklabels=["GPU", "host"], xlim=(0, tl["window_us"]))
        ax.set_ylabel(name.replace("_", "\n"), fontsize=8, rotation=0, ha="right", va="center")
    axes[-1, 0].set_xlabel("µs from the window's start")
    handles = [Patch(color=SECTION_COLORS[s], label=s) for s in HOST_LANES]
    handles += [Patch(facecolor="white", edgecolor="0.6", label="other host: the gaps"),
                Patch(color=SECTION_COLORS["gpu"], label="gpu")]  # fmt: skip
    axes[0, 0].legend(handles=handles, fontsize=7, ncols=5, loc="lower right",
                      bbox_to_anchor=(1, 1.02))  # fmt: skip
    fig.suptitle(f"{n_slots} rows, one window, GPU busy: {', '.join(shares)}", fontsize=10)
    return label_source(fig, rec, "window from the middle of a profiled run of the workload")


def late_read_schedule(
    host_us: float, gpu_us: float, overlap: bool, turns: int = 4, launch_us: float = 10.0
) -> dict:
    """A model of PagedEngine's turns, not a measurement, for notebook 09's picture. Each turn
    the host launches step t (launch_us), waits, then hands out the ids of step t - 1 and
    admits (host_us). The GPU runs step t for gpu_us, once it is launched and step t - 1 has
    ended. overlap=False: the host waits for step t itself; overlap=True: for the copy of
    step t's input, queued before step t, so ready as step t begins. Returns the host's spans
    ("launch", "wait", "host") and the GPU's ("gpu"), (start, end) lists, "period": the last
    turn's length, and "busy": the GPU's share of that turn, gpu_us / period."""
    spans = {"launch": [], "wait": [], "host": [], "gpu": []}
    t = gpu_end = 0.0
    starts = []
    for _ in range(turns):
        starts.append(t)
        spans["launch"].append((t, t + launch_us))
        begin = max(t + launch_us, gpu_end)  # the step, once launched and the one before done
        gpu_end = begin + gpu_us
        spans["gpu"].append((begin, gpu_end))
        ready = begin if overlap else gpu_end
        spans["wait"].append((t + launch_us, ready))
        spans["host"].append((ready, ready + host_us))
        t = ready + host_us
    period = starts[-1] - starts[-2]
    return {**spans, "period": period, "busy": gpu_us / period}


def late_read_figure(host_us: float, gpu_us: float, turns: int = 4, launch_us: float = 10.0):
    """late_read_schedule drawn, overlap=False above and overlap=True below: the host's lane
    (launch, wait, hand out and admit) over the GPU's (its steps). The title gives each
    setting's turn and GPU busy share, from the schedule drawn."""
    fig, axes = new_figure(2, 1, figsize=(8, 3.4), sharex=True)
    said = []
    for ax, overlap in zip(axes, (False, True)):
        sc = late_read_schedule(host_us, gpu_us, overlap, turns, launch_us)
        for lane, y, color in (("launch", 1.1, SECTION_COLORS["launch"]),
                               ("host", 1.1, SECTION_COLORS["other host"]),
                               ("gpu", 0.1, SECTION_COLORS["gpu"])):  # fmt: skip
            ax.broken_barh([(a, b - a) for a, b in sc[lane]], (y, 0.8), facecolor=color,
                           edgecolor="white")  # fmt: skip
        waits = [(a, b - a) for a, b in sc["wait"] if b > a]
        ax.broken_barh(waits, (1.1, 0.8), facecolor="white",
                       edgecolor=SECTION_COLORS["read ids"], hatch="///")  # fmt: skip
        for i, (a, b) in enumerate(sc["gpu"]):
            ax.text((a + b) / 2, 0.5, f"step {i}", ha="center", va="center", fontsize=7)
        ax.set(yticks=[0.5, 1.5], yticklabels=["GPU", "host"])
        ax.set_ylabel(f"overlap={overlap}", fontsize=8, rotation=0, ha="right", va="center")
        said.append(f"overlap={overlap}: a turn every {sig3(sc['period'])} µs, GPU busy "
                    f"{sc['busy']:.0%}")  # fmt: skip
    axes[-1].set_xlabel("µs (a model: the times set, not measured)")
    handles = [Patch(color=SECTION_COLORS["launch"], label="launch step t"),
               Patch(facecolor="white", edgecolor=SECTION_COLORS["read ids"], hatch="///",
                     label="wait for the ids"),
               Patch(color=SECTION_COLORS["other host"], label="hand out step t-1's ids, admit"),
               Patch(color=SECTION_COLORS["gpu"], label="GPU step")]  # fmt: skip
    axes[0].legend(handles=handles, fontsize=7, ncols=4, loc="lower right",
                   bbox_to_anchor=(1, 1.02))  # fmt: skip
    fig.suptitle("; ".join(said), fontsize=10, y=1.08)
    return fig


SCALE_COLORS = {"host": "#000000", "replay": SECTION_COLORS["gpu"], "tok_s": "#0072B2",
                "before": "#999999"}  # fmt: skip


GPU_STEP = ("gpu_us_per_step", "fills", "gpu_us_per_fill", "steps")


def gpu_per_step(run: dict) -> float:
    """The GPU's µs for an average decode step of an engine_scale run: its decode replay's
    mean, and its prefill replays spread over its steps."""
    return run["gpu_us_per_step"] + run["fills"] * run["gpu_us_per_fill"] / run["steps"]


def scale_figure(rec: dict):
    """results/<gpu>_engine_scale.json against the rows, on a log2 axis. Left: the host's
    µs per step (median, engine_time.HOST_PER_STEP), the all-rows decode graph replayed
    alone, and the GPU's µs for an average step, its prefills included (gpu_per_step); right:
    tok/s. The engine before ("before", named by "before_label": the same keys but the replay
    alone) is drawn as grey markers at the sizes the recording holds, and only there. The
    title gives the tok/s from the fewest rows to the most, and at the most rows the host's
    µs per step over the replay's, read from the data."""
    rows = sorted(rec["rows"], key=lambda r: r["n_rows"])
    before = sorted(rec.get("before") or [], key=lambda r: r["n_rows"])
    fig, (left, right) = new_figure(1, 2, figsize=(9.5, 3.6))
    n = [r["n_rows"] for r in rows]
    left.plot(n, [r["host_us_per_step"] for r in rows], "o-", color=SCALE_COLORS["host"],
              label="host, per step (median)")  # fmt: skip
    left.plot(n, [r["replay_alone_us"] for r in rows], "s-", color=SCALE_COLORS["replay"],
              label="the all-rows graph, replayed alone")  # fmt: skip
    left.plot(n, [gpu_per_step(r) for r in rows], "^--", color=SCALE_COLORS["replay"],
              label="GPU, per step (mean, prefills included)")  # fmt: skip
    right.plot(n, [r["tok_s"] for r in rows], "o-", color=SCALE_COLORS["tok_s"],
               label="PagedEngine")  # fmt: skip
    if before:
        nb, name = [r["n_rows"] for r in before], rec.get("before_label", "the engine before")
        # markers alone: it ran at fewer sizes, and a line would cross sizes it never ran
        left.plot(nb, [r["host_us_per_step"] for r in before], "D", mfc="none",
                  color=SCALE_COLORS["before"], label=f"host, {name}")  # fmt: skip
        if all(k in r for r in before for k in GPU_STEP):
            left.plot(nb, [gpu_per_step(r) for r in before], "^", mfc="none",
                      color=SCALE_COLORS["before"], label=f"GPU, {name}")  # fmt: skip
        right.plot(nb, [r["tok_s"] for r in before], "D", mfc="none",
                   color=SCALE_COLORS["before"], label=name)  # fmt: skip
    ticks = sorted({*n, *(r["n_rows"] for r in before)})
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_ylim(0, None)
        ax.legend(fontsize=7, loc="upper left")
    left.set(xlabel="rows", ylabel="µs per decode step")
    right.set(xlabel="rows", ylabel="tokens per second")
    first, last = rows[0], rows[-1]
    host, replay = last["host_us_per_step"], last["replay_alone_us"]
    if host > replay:
        at_most = f"the host takes {sig3(host)} µs a step, {sig3(host / replay)}× the replay alone"
    else:
        at_most = f"the host takes {sig3(host)} µs a step, within the replay's {sig3(replay)} µs"
    fig.suptitle(f"{sig3(first['tok_s'])} to {sig3(last['tok_s'])} tok/s from {first['n_rows']} "
                 f"to {last['n_rows']} rows; at {last['n_rows']} rows {at_most}",
                 fontsize=10)  # fmt: skip
    return label_source(fig, rec, "host: median over a run's decode steps, admissions included")


def scale_groups(rec: dict) -> dict[str, list[dict]]:
    """The engine_scale recording's runs at the sizes run more than once, by engine."""
    compare = {r["n_rows"] for r in rec["before"]}
    return {
        "PagedEngine": [r for r in rec["rows"] if r["n_rows"] in compare] + rec["repeats"],
        rec["before_label"]: rec["before"],
        "compile=True": rec["compile"],
    }


def preset_table(cp: dict) -> list[dict]:
    """results/h200_capture_policy.json per preset: graphs, padded share of the rows the
    graphs computed, capture seconds (largest first) and the shared pool in MiB."""
    out = []
    for name, pad in cp["padding"]["presets"].items():
        m = cp["measured"]["presets"].get(name, {})
        pool, linear = m.get("shared_pool_bytes"), m.get("linear_estimate_bytes")
        out.append({"preset": name, "graphs": pad["graphs"], "waste_share": pad["waste_share"],
                    "capture_s": m.get("largest_first_capture_s"),
                    "pool_mib": None if pool is None else pool / MIB,
                    "linear_estimate_mib": None if linear is None else linear / MIB})  # fmt: skip
    return out


def capture_policy_figure(cp: dict):
    """Each preset's padding waste (left) and its graphs' capture seconds (right), from the
    recording; the title names the preset with the least padding and the pool they share."""
    rows = preset_table(cp)
    fig, (left, right) = new_figure(1, 2, figsize=(9, 3.4))
    names = [r["preset"] for r in rows]
    left.bar(names, [100 * r["waste_share"] for r in rows], color="#999999")
    for i, r in enumerate(rows):
        left.text(i, 100 * r["waste_share"], f"{r['graphs']} graphs", ha="center",
                  va="bottom", fontsize=7)  # fmt: skip
    left.set(ylabel="padded rows (% of rows computed)")
    right.bar(names, [r["capture_s"] or 0 for r in rows], color="#0072B2")
    right.set(ylabel="capture, largest first (s)")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
    best = min(rows, key=lambda r: r["waste_share"])
    pools = {r["pool_mib"] for r in rows if r["pool_mib"] is not None}
    pool = (
        f"; every preset's graphs share one pool of {sig3(max(pools))} MiB"
        if len(pools) == 1
        else ""
    )
    n = cp["padding"]["n_slots"]
    fig.suptitle(f"{n} rows: {best['preset']} pads least ({best['waste_share']:.2%}){pool}",
                 fontsize=10)  # fmt: skip
    return label_source(fig, cp)


# --- live counts, on this machine -----------------------------------------------------------


def prefill_forwards(engine, prompts, news) -> dict:
    """Serve the requests on `engine` (eager decode, use_graph=False, so that every forward
    of the model is a call) and count the model's forwards of more than one position: the
    prefills. Returns {"forwards", "admissions", "requests"}."""
    shapes = []
    hook = engine.model.register_forward_pre_hook(lambda m, args: shapes.append(args[0].shape))
    try:
        for p, n in zip(prompts, news):
            engine.submit(p, n)
        engine.run()
    finally:
        hook.remove()
    return {"forwards": sum(1 for s in shapes if s[1] > 1), "admissions": len(engine.admissions),
            "requests": len(prompts)}  # fmt: skip


def count_ops(fn) -> int:
    """How many aten ops fn() dispatches (each one a kernel launch on a GPU, views aside)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return len(seen)
