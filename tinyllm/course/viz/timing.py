"""Figures of recorded GPU timings (notebooks 01, 04 and 07): step time against batch size,
CPU issue time against GPU kernel time, the profiled timeline, kernels by family, the
bandwidth floor, capture and pools, and fusion. Each draws results/<gpu>.json or its trace."""

import numpy as np
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch

from tinyllm.course.viz.style import (
    COLORS,
    LABELS,
    MIB,
    batch_index,
    label_source,
    new_figure,
    sig3,
)
from tinyllm.lab.anatomy import kernel_families
from tinyllm.lab.results import launch_bound_batches

# --- recorded timings (results/<gpu>.json, traces/<gpu>.json) ---------------------------


def step_time_figure(res: dict):
    """Median step time vs batch size for the three decode paths, shaded from min to max
    over the repeats where the recording has them; and eager decode's two sides, which the
    title compares: the CPU's time to issue a step (measured apart, with the GPU idle
    before it) and its kernels' summed time on the GPU."""
    st, ct, gk = res["step_time"], res["cpu_time"], res["gpu_kernel_time"]
    b = st["batch"]
    fig, ax = new_figure(figsize=(6, 4))
    for key in ("eager", "static", "graph"):
        ax.plot(b, st[f"{key}_us"], "o-", color=COLORS[key], label=f"{LABELS[key]}: step")
        if f"{key}_min_us" in st:  # the spread over the interleaved repeats
            ax.fill_between(
                b, st[f"{key}_min_us"], st[f"{key}_max_us"], color=COLORS[key], alpha=0.2
            )
    ax.plot(
        ct["batch"], ct["eager_us"], "x", ms=8, color=COLORS["eager"],
        label="eager: CPU issue time (measured apart)",
    )  # fmt: skip
    ax.plot(
        gk["batch"], gk["eager_us"], "s--", mfc="none", color=COLORS["eager"],
        label="eager: GPU kernels, summed",
    )  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(b, [str(x) for x in b])
    ax.set(xlabel="batch size (rows)", ylabel="µs per decode step (median)")
    ax.legend(fontsize=7)
    bound = launch_bound_batches(res)
    if bound == set(b):
        title = (
            f"Eager decode is launch-bound at every batch from {b[0]} to {b[-1]}: the CPU\n"
            f"takes longer to issue a step (×) than its kernels run on the GPU (dashed)"
        )
    elif bound:
        title = f"Eager decode is launch-bound at batch {', '.join(map(str, sorted(bound)))}"
    else:
        title = f"The GPU's work, not the launches, sets the eager step at batch {b[0]}-{b[-1]}"
    ax.set_title(title, fontsize=10)
    return label_source(fig, res)


def cpu_gpu_figure(res: dict, batch: int):
    """Per step: time the CPU takes to issue it vs time its kernels run on the GPU."""
    i, j = batch_index(res["cpu_time"], batch), batch_index(res["gpu_kernel_time"], batch)
    keys = ("eager", "graph")
    cpu = [res["cpu_time"][f"{k}_us"][i] for k in keys]
    gpu = [res["gpu_kernel_time"][f"{k}_us"][j] for k in keys]
    colors = [COLORS[k] for k in keys]
    fig, ax = new_figure(figsize=(6, 4))
    x = np.arange(len(keys))
    ax.bar_label(
        ax.bar(x - 0.2, cpu, 0.4, facecolor="white", edgecolor=colors, hatch="///"), fmt=sig3
    )
    ax.bar_label(ax.bar(x + 0.2, gpu, 0.4, color=colors), fmt=sig3)
    ax.set_xticks(x, [LABELS[k] for k in keys])
    ax.set_ylabel("time per decode step (µs, median)")
    ax.legend(
        handles=[
            Patch(fc="white", ec="0.3", hatch="///", label="CPU: issue the step"),
            Patch(color="0.3", label="GPU: kernels run"),
        ],
        fontsize=8,
    )
    if batch in launch_bound_batches(res):  # the test of notebook 01, as the titles use it
        title = (
            f"Batch {batch}: the CPU needs {sig3(cpu[0])} µs to issue {sig3(gpu[0])} µs "
            f"of GPU work;\ngraph replay issues the whole step in {sig3(cpu[1])} µs"
        )
    else:
        title = (
            f"Batch {batch}: eager decode's GPU work ({sig3(gpu[0])} µs) outlasts its "
            f"CPU issue time ({sig3(cpu[0])} µs)"
        )
    ax.set_title(title, fontsize=10)
    return label_source(fig, res)


def _first_steps(events: list[dict], steps: int) -> list[dict]:
    keep = sorted({e["step"] for e in events})[:steps]
    return [e for e in events if e["step"] in keep]


def is_kernel(event: dict) -> bool:
    """A GPU event that is a kernel: not a copy or a fill (Memcpy, Memset)."""
    return event["kind"] == "gpu" and not event.get("name", "").startswith(("Memcpy", "Memset"))


def gpu_idle_share(events: list[dict]) -> float:
    """Share of the time from the first kernel's start to the last one's end with no
    kernel running. Copies (the token into the graph's static input) are left out: they
    run before the launch and would count the launch itself as a gap."""
    spans = sorted((e["start_us"], e["start_us"] + e["dur_us"]) for e in events if is_kernel(e))
    busy, end = 0.0, spans[0][0]
    for s, e in spans:
        busy += max(0.0, e - max(s, end))
        end = max(end, e)
    return 1 - busy / (end - spans[0][0])


MIN_BAR_SHARE = 1 / 500  # the narrowest bar a timeline draws, as a share of its time axis


def widened(spans, min_width: float) -> list[tuple[float, float]]:
    """(start, width) spans with every width raised to at least min_width, starts kept:
    a 1 µs kernel on a 10 ms axis is a tenth of a pixel wide, and would not be drawn."""
    return [(start, max(width, min_width)) for start, width in spans]


def timeline_figure(
    trace: dict, batch: int, steps: int = 1, methods=("eager", "graph"), kernels_only=False
):
    """Profiled decode steps, one row per method: kernels as bars on a µs axis, the CPU's
    launch calls as a thin lane under them. Every bar is at least MIN_BAR_SHARE of the
    time axis wide, so each kernel is seen (the footnote says so); starts are exact.
    kernels_only: the GPU's kernels alone, from the first one's start to the last one's
    end. The copies (Memcpy, Memset), the CPU's lane and the time before the first kernel
    are left out, and the title says so."""
    runs = trace["batch"].get(str(batch))
    if runs is None:
        raise ValueError(
            f"batch {batch} was not traced; traced batches: {sorted(trace['batch'], key=int)}"
        )
    fig, axes = new_figure(
        len(methods), 1, sharex=True, squeeze=False, figsize=(9, 1.2 + 1.3 * len(methods))
    )
    shown = {m: _first_steps(runs[m], steps) for m in methods}
    if kernels_only:
        shown = {m: [e for e in shown[m] if is_kernel(e)] for m in methods}
    lanes = (
        (("gpu", 1, 0.7, 1.0),) if kernels_only else (("gpu", 1, 0.7, 1.0), ("cpu", 0, 0.3, 0.6))
    )
    t0 = {m: min(e["start_us"] for e in shown[m]) for m in methods}
    span = max(e["start_us"] + e["dur_us"] - t0[m] for m in methods for e in shown[m])
    min_width = MIN_BAR_SHARE * span
    idle, narrow = {}, False
    for ax, m in zip(axes[:, 0], methods):
        events = shown[m]
        for kind, y, h, alpha in lanes:
            spans = [(e["start_us"] - t0[m], e["dur_us"]) for e in events if e["kind"] == kind]
            narrow = narrow or any(d < min_width for _, d in spans)
            colors = COLORS[m]
            if kernels_only:  # two shades in turn: kernels back to back are told apart
                spans.sort()
                colors = [to_rgba(COLORS[m], 1.0 if i % 2 else 0.55) for i in range(len(spans))]
            bars = ax.broken_barh(
                widened(spans, min_width),
                (y - h / 2, h),
                facecolors=colors,
                alpha=None if kernels_only else alpha,
            )
            bars.set_gid(f"{m} {kind}")
        if kernels_only:
            ax.set_yticks([1], ["GPU kernels"])
            ax.set_ylim(0.4, 1.6)
        else:
            ax.set_yticks([0, 1], ["CPU launches", "GPU kernels"])
        ax.set_ylabel(LABELS[m], fontsize=8)
        idle[m] = gpu_idle_share(events)
    what = ", ".join(f"{LABELS[m]} {idle[m]:.0%}" for m in methods)
    if kernels_only:
        axes[-1, 0].set_xlim(0, span)
        axes[-1, 0].set_xlabel("time since the first kernel's start (µs)")
        fig.suptitle(
            f"GPU idle between kernels, batch {batch}: {what}\n(the kernels alone, from the "
            f"first one's start to the last one's end: the copies and the CPU are not drawn)",
            fontsize=10,
        )
    else:
        axes[-1, 0].set_xlim(0, span * 1.01)
        axes[-1, 0].set_xlabel("time since the step's first event (µs)")
        gone = "eager" in idle and "graph" in idle and idle["graph"] < idle["eager"]
        fig.suptitle(
            ("Graph replay removes the launch gaps: " if gone else "")
            + f"GPU idle between kernels, batch {batch}: {what}\n(under the profiler, "
            f"which slows the CPU side: see the untraced step times for the real ones)",
            fontsize=10,
        )
    notes = [
        f"Bars narrower than {sig3(min_width)} µs are widened to {sig3(min_width)} µs to be "
        f"seen (starts exact); the idle shares use the true durations."
    ]
    if kernels_only:  # the widening note only where a bar was widened
        notes = (notes if narrow else []) + [
            "Kernels alternate two shades, so that kernels back to back are told apart; "
            "white is time with no kernel running."
        ]
    return label_source(fig, trace, *notes)


def capture_figure(res: dict):
    """Capture time and pool memory per window, and one shared pool vs a pool per graph."""
    cap = res["capture"]
    w = [str(x) for x in cap["windows"]]
    fig, (a1, a2, a3) = new_figure(1, 3, figsize=(11, 3.6), width_ratios=[3, 3, 2])
    a1.bar(w, [s * 1e3 for s in cap["capture_s"]], color=COLORS["graph"])
    a1.set(xlabel="window (keys)", ylabel="capture time (ms)", title="Capture time per graph")
    a2.bar(w, [b / MIB for b in cap["pool_bytes"]], color=COLORS["graph"])
    a2.set(xlabel="window (keys)", ylabel="pool memory (MiB)", title="Memory per graph, own pool")
    shared, separate = cap["shared_pool_bytes"] / MIB, cap["separate_pools_bytes"] / MIB
    a3.bar_label(
        a3.bar(
            ["one shared\npool", "a pool\nper graph"],
            [shared, separate],
            color=[COLORS["graph"], COLORS["wasted"]],
        ),
        fmt=sig3,
    )
    a3.set(ylabel="pool memory (MiB)", title="All graphs")
    verdict = "saves memory" if shared < separate else "does not save memory here"
    fig.suptitle(
        f"One pool shared by all {len(w)} graphs {verdict}: {sig3(shared)} MiB vs "
        f"{sig3(separate)} MiB (all captured in {sig3(cap['total_capture_s'])} s)",
        fontsize=10,
    )
    return label_source(fig, res)


# --- one decode step, kernel by kernel (notebook 01) ----------------------------------------
# (anatomy.py counts the ops and groups the kernels; these draw them)


def kernels_figure(trace: dict, batch: int = 1, method: str = "eager"):
    """One traced decode step's kernels, counted by family."""
    runs = trace["batch"].get(str(batch))
    if runs is None or method not in runs:
        raise ValueError(f"batch {batch}, {method} was not traced")
    fam = kernel_families(runs[method])
    total = sum(fam.values())
    fig, ax = new_figure(figsize=(7, 3.4))
    names = list(fam)[::-1]
    ax.bar_label(ax.barh(names, [fam[n] for n in names], color=COLORS[method]), padding=2)
    ax.set(xlabel="kernels in one decode step", xlim=(0, max(fam.values()) * 1.15))
    top = next(iter(fam))
    ax.set_title(
        f"One {method} decode step at batch {batch} launches {total} kernels;\n"
        f"{fam[top]} of them are {top}",
        fontsize=10,
    )
    return label_source(fig, trace)


def floor_times(res: dict, batch: int = 1) -> dict[str, float]:
    """µs per step at `batch`: the bandwidth floor, the eager step's summed kernel time,
    the graph replay step and the eager step."""
    i = batch_index(res["step_time"], batch)
    j = batch_index(res["gpu_kernel_time"], batch)
    return {
        "floor": res["bandwidth"]["floor_us"],
        "kernels": res["gpu_kernel_time"]["eager_us"][j],
        "graph": res["step_time"]["graph_us"][i],
        "eager": res["step_time"]["eager_us"][i],
    }


def floor_figure(res: dict, batch: int = 1):
    """The bandwidth floor (weights read once at the measured copy bandwidth) against the
    measured step times, on a log axis."""
    t = floor_times(res, batch)
    labels = [
        "bandwidth floor:\nread every weight once",
        "eager: kernels'\nsummed run time",
        "graph replay:\nstep time",
        "eager:\nstep time",
    ]
    fig, ax = new_figure(figsize=(7, 3.8))
    bars = ax.bar(
        labels,
        list(t.values()),
        color=[COLORS["current"], COLORS["eager"], COLORS["graph"], COLORS["eager"]],
    )
    bars.patches[1].set_alpha(0.5)
    ax.bar_label(bars, labels=[f"{sig3(v)} µs" for v in t.values()], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"time per decode step, batch {batch} (µs)")
    ax.set_title(
        f"The eager step takes {sig3(t['eager'] / t['floor'])}× the bandwidth floor, "
        f"graph replay {sig3(t['graph'] / t['floor'])}×:\nthe weights are not what "
        f"it waits for",
        fontsize=10,
    )
    return label_source(fig, res)


NODE_COLORS = {"torch add_": COLORS["eager"], "triton": COLORS["graph"],
               "triton, PDL": COLORS["fused"]}  # fmt: skip


def node_floor_figure(floor: dict):
    """results/<gpu>_floor.json: µs per replay of a graph of K one-number kernels, launched
    three ways, each with its fitted line (lab.floor.fit, from K = 10 on); the title gives the
    µs each node adds."""
    fig, ax = new_figure(figsize=(7, 3.8))
    ks = floor["ks"]
    for name, color in NODE_COLORS.items():
        way = floor[name]
        ax.plot(ks, way["us"], "o", color=color, label=f"{name}: {way['us_per_node']} µs a node")
        line = [way["fixed_us"] + way["us_per_node"] * k for k in ks]
        ax.plot(ks, line, "-", color=color, lw=1, alpha=0.6)
    ax.set(xlabel="kernels in the graph (K)", ylabel="µs per replay", ylim=(0, None))
    ax.legend(fontsize=8)
    per = {name: floor[name]["us_per_node"] for name in NODE_COLORS}
    ax.set_title(  # the recorded values, as the legend shows them
        f"A replayed graph still pays {per['triton']} µs for each Triton kernel,\n"
        f"{per['torch add_']} µs for each of torch's, and {per['triton, PDL']} µs with PDL",
        fontsize=10,
    )
    return label_source(fig, floor, "each kernel adds one to one number: no work worth timing")
