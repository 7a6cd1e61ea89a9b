"""Figures for the notebooks: one message per figure, drawn from data a test can check.

Every function returns a matplotlib Figure and never calls plt.show(). Each figure is
closed to pyplot as soon as it is made: a notebook cell that ends with the call shows it
once, and a loop or a widget that draws many leaks none. Titles state the message, and
any claim in a title is computed from the data it is drawn from.

The arithmetic the figures draw (masks, bucket windows, wasted work) is the book's own
(tinyllm.kv_cache.window_mask and slot_mask, tinyllm.graphs.bucket_windows, wasted_share
and bucket_tradeoff), so a picture of a mask is the mask the decoder uses. The helpers
here (gpu_idle_share, slot_segments) read recorded traces and engine stats.
"""

import io

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from tinyllm.lab.anatomy import kernel_families
from tinyllm.graphs import bucket_tradeoff, bucket_windows, check_buckets, wasted_share

# One meaning, one colour, in every notebook: the Okabe–Ito palette (safe for the common
# colour-vision deficiencies), with greys for what is computed but thrown away. Requests in
# the slot timeline cycle through the palette's colours.
COLORS = {
    "eager": "#D55E00",      # vermillion
    "static": "#E69F00",     # orange
    "graph": "#0072B2",      # blue
    "compiled": "#CC79A7",   # reddish purple
    "fused": "#009E73",      # bluish green
    "attended": "#56B4E9",   # sky blue: a key the query attends to
    "masked": "#D9D9D9",     # light grey: a key past the position, masked
    "pad": "#F0E442",        # yellow: a left-pad key, masked
    "current": "#000000",    # black: the position being decoded
    "wasted": "#999999",     # grey: work spent on masked keys
    "train": "#999999",      # training loss: grey, the validation loss is what matters
    "val": "#000000",
    "requests": ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"),
}
LABELS = {
    "eager": "eager (dynamic KVCache)",
    "static": "static step, run eagerly",
    "graph": "graph replay",
}
MIB = 2 ** 20


def sig3(x: float) -> str:
    """x to 3 significant figures, without an exponent below 1e6: 1400, 13, 0.0512."""
    return f"{float(f'{x:.3g}'):g}"


class CourseFigure(Figure):
    """A Figure that renders itself as a PNG in Jupyter, with or without pyplot's inline
    backend (that backend registers its own PNG formatter only after the first cell that
    draws a figure has finished)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png")
        return buf.getvalue()


def _figure(nrows: int = 1, ncols: int = 1, **kw):
    fig, axes = plt.subplots(nrows, ncols, layout="constrained", FigureClass=CourseFigure, **kw)
    plt.close(fig)  # pyplot forgets it: shown once as a cell's value, never leaked
    return fig, axes


# --- masks ------------------------------------------------------------------------------

def mask_figure(mask, pos: int | None = None, first_valid=None, title: str | None = None):
    """A (B, W) mask as an image: rows = batch rows, columns = key positions. The image
    array is the mask itself (1 = attended); pad keys and the current position are drawn
    on top of it."""
    m = np.asarray(mask, dtype=int)
    B, W = m.shape
    fig, ax = _figure(figsize=(min(12, max(6, 1.2 + 0.3 * W)), 2 + 0.3 * B))
    ax.imshow(m, cmap=ListedColormap([COLORS["masked"], COLORS["attended"]]), vmin=0, vmax=1,
              aspect="auto")
    handles = [Patch(color=COLORS["attended"], label="attended key"),
               Patch(color=COLORS["masked"], label="masked key")]
    if first_valid is not None:
        pad = np.arange(W)[None, :] < np.asarray(first_valid)[:, None]
        ax.imshow(np.ma.masked_where(~(pad & (m == 0)), m), cmap=ListedColormap([COLORS["pad"]]),
                  aspect="auto")
        handles.append(Patch(color=COLORS["pad"], label="pad key (masked)"))
    if pos is not None:
        ax.add_patch(Rectangle((pos - 0.5, -0.5), 1, B, fill=False, lw=2, ec=COLORS["current"]))
        handles.append(Patch(fill=False, ec=COLORS["current"], lw=2,
                             label=f"current position {pos}"))
    if W <= 64:  # cell borders, while cells are big enough to see them
        ax.set_xticks(np.arange(-0.5, W), minor=True)
        ax.set_yticks(np.arange(-0.5, B), minor=True)
        ax.grid(which="minor", color="white", lw=0.5)
        ax.tick_params(which="minor", length=0)
    ax.set(xlabel="key position (tokens)", ylabel="batch row", yticks=range(B))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    if title is None:
        title = (f"{int(m.sum())} of {m.size} (row, key) pairs attended" if pos is None else
                 f"Position {pos}: all {W} keys are computed, later keys and pads masked")
    ax.set_title(title, fontsize=10)
    return fig


# --- buckets ----------------------------------------------------------------------------

def bucket_figure(buckets, max_len: int):
    """Window vs keys needed: the gap to the exact-length diagonal is the wasted work."""
    buckets = check_buckets(buckets, max_len)
    n = np.arange(1, max_len + 1)
    w = np.array(bucket_windows(buckets, max_len))
    fig, ax = _figure(figsize=(6, 4))
    ax.fill_between(n, n, w, step="pre", color=COLORS["wasted"], alpha=0.5,
                    label="wasted: masked keys computed")
    ax.plot(n, w, drawstyle="steps-pre", color=COLORS["graph"], label="graph: bucket window")
    ax.plot(n, n, color=COLORS["eager"], label="eager: exactly n keys")
    ax.set(xlabel="keys needed n = position + 1 (tokens)", ylabel="keys attended (tokens)",
           xlim=(0, max_len), ylim=(0, max_len * 1.02))
    ax.legend(loc="upper left", fontsize=8)
    graphs = f"{len(buckets)} graph{'s' * (len(buckets) > 1)}"
    ax.set_title(f"{graphs}: {wasted_share(buckets, max_len):.0%} of attention work is on masked "
                 f"keys\n(one {max_len}-key window: {wasted_share((max_len,), max_len):.0%})",
                 fontsize=10)
    return fig


# --- recorded timings (results/<gpu>.json, traces/<gpu>.json) ---------------------------

def _batch_index(table: dict, batch: int) -> int:
    if batch not in table["batch"]:
        raise ValueError(f"batch {batch} was not recorded; recorded batches: {table['batch']}")
    return table["batch"].index(batch)


def step_time_figure(res: dict):
    """Median step time vs batch size for the three decode paths."""
    st = res["step_time"]
    b = st["batch"]
    fig, ax = _figure(figsize=(6, 4))
    for key in ("eager", "static", "graph"):
        ax.plot(b, st[f"{key}_us"], "o-", color=COLORS[key], label=LABELS[key])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(b, [str(x) for x in b])
    ax.set(xlabel="batch size (rows)", ylabel="decode step time (µs, median)")
    ax.legend(fontsize=8)
    growth = st["eager_us"][-1] / st["eager_us"][0]
    if growth < 1.5:  # flat while the work grows b[-1]/b[0]-fold
        title = (f"An eager decode step costs about the same at batch {b[0]} and {b[-1]} "
                 f"(×{sig3(growth)}):\nit is launch-bound")
    else:
        title = f"Eager step time grows ×{sig3(growth)} from batch {b[0]} to {b[-1]}"
    ax.set_title(title, fontsize=10)
    return fig


def cpu_gpu_figure(res: dict, batch: int):
    """Per step: time the CPU takes to issue it vs time its kernels run on the GPU."""
    i, j = _batch_index(res["cpu_time"], batch), _batch_index(res["gpu_kernel_time"], batch)
    keys = ("eager", "graph")
    cpu = [res["cpu_time"][f"{k}_us"][i] for k in keys]
    gpu = [res["gpu_kernel_time"][f"{k}_us"][j] for k in keys]
    colors = [COLORS[k] for k in keys]
    fig, ax = _figure(figsize=(6, 4))
    x = np.arange(len(keys))
    ax.bar_label(ax.bar(x - 0.2, cpu, 0.4, facecolor="white", edgecolor=colors, hatch="///"),
                 fmt=sig3)
    ax.bar_label(ax.bar(x + 0.2, gpu, 0.4, color=colors), fmt=sig3)
    ax.set_xticks(x, [LABELS[k] for k in keys])
    ax.set_ylabel("time per decode step (µs, median)")
    ax.legend(handles=[Patch(fc="white", ec="0.3", hatch="///", label="CPU: issue the step"),
                       Patch(color="0.3", label="GPU: kernels run")], fontsize=8)
    if cpu[0] > gpu[0]:
        title = (f"Batch {batch}: the CPU needs {sig3(cpu[0])} µs to issue {sig3(gpu[0])} µs "
                 f"of GPU work;\ngraph replay issues the whole step in {sig3(cpu[1])} µs")
    else:
        title = (f"Batch {batch}: eager decode's GPU work ({sig3(gpu[0])} µs) outlasts its "
                 f"CPU issue time ({sig3(cpu[0])} µs)")
    ax.set_title(title, fontsize=10)
    return fig


def _first_steps(events: list[dict], steps: int) -> list[dict]:
    keep = sorted({e["step"] for e in events})[:steps]
    return [e for e in events if e["step"] in keep]


def gpu_idle_share(events: list[dict]) -> float:
    """Share of the time from the first kernel's start to the last one's end with no
    kernel running. Copies (the token into the graph's static input) are left out: they
    run before the launch and would count the launch itself as a gap."""
    spans = sorted((e["start_us"], e["start_us"] + e["dur_us"]) for e in events
                   if e["kind"] == "gpu" and not e.get("name", "").startswith(("Memcpy", "Memset")))
    busy, end = 0.0, spans[0][0]
    for s, e in spans:
        busy += max(0.0, e - max(s, end))
        end = max(end, e)
    return 1 - busy / (end - spans[0][0])


def timeline_figure(trace: dict, batch: int, steps: int = 1, methods=("eager", "graph")):
    """Profiled decode steps, one row per method: kernels as bars on a µs axis, the CPU's
    launch calls as a thin lane under them."""
    runs = trace["batch"].get(str(batch))
    if runs is None:
        raise ValueError(f"batch {batch} was not traced; traced batches: "
                         f"{sorted(trace['batch'], key=int)}")
    fig, axes = _figure(len(methods), 1, sharex=True, squeeze=False,
                        figsize=(9, 1.2 + 1.3 * len(methods)))
    idle = {}
    for ax, m in zip(axes[:, 0], methods):
        events = _first_steps(runs[m], steps)
        t0 = min(e["start_us"] for e in events)
        for kind, y, h, alpha in (("gpu", 1, 0.7, 1.0), ("cpu", 0, 0.3, 0.6)):
            spans = [(e["start_us"] - t0, e["dur_us"]) for e in events if e["kind"] == kind]
            ax.broken_barh(spans, (y - h / 2, h), facecolors=COLORS[m], alpha=alpha)
        ax.set_yticks([0, 1], ["CPU launches", "GPU kernels"])
        ax.set_ylabel(LABELS[m], fontsize=8)
        idle[m] = gpu_idle_share(events)
    axes[-1, 0].set_xlabel("time since the step's first event (µs)")
    what = ", ".join(f"{LABELS[m]} {idle[m]:.0%}" for m in methods)
    gone = "eager" in idle and "graph" in idle and idle["graph"] < idle["eager"]
    fig.suptitle(("Graph replay removes the launch gaps: " if gone else "") +
                 f"GPU idle between kernels, batch {batch}: {what}\n(under the profiler, "
                 f"which slows the CPU side: see the untraced step times for the real ones)",
                 fontsize=10)
    return fig


def capture_figure(res: dict):
    """Capture time and pool memory per window, and one shared pool vs a pool per graph."""
    cap = res["capture"]
    w = [str(x) for x in cap["windows"]]
    fig, (a1, a2, a3) = _figure(1, 3, figsize=(11, 3.6), width_ratios=[3, 3, 2])
    a1.bar(w, [s * 1e3 for s in cap["capture_s"]], color=COLORS["graph"])
    a1.set(xlabel="window (keys)", ylabel="capture time (ms)", title="Capture time per graph")
    a2.bar(w, [b / MIB for b in cap["pool_bytes"]], color=COLORS["graph"])
    a2.set(xlabel="window (keys)", ylabel="pool memory (MiB)", title="Memory per graph, own pool")
    shared, separate = cap["shared_pool_bytes"] / MIB, cap["separate_pools_bytes"] / MIB
    a3.bar_label(a3.bar(["one shared\npool", "a pool\nper graph"], [shared, separate],
                        color=[COLORS["graph"], COLORS["wasted"]]), fmt=sig3)
    a3.set(ylabel="pool memory (MiB)", title="All graphs")
    verdict = "saves memory" if shared < separate else "does not save memory here"
    fig.suptitle(f"One pool shared by all {len(w)} graphs {verdict}: {sig3(shared)} MiB vs "
                 f"{sig3(separate)} MiB (all captured in {sig3(cap['total_capture_s'])} s)",
                 fontsize=10)
    return fig


def engine_figure(res: dict):
    """Continuous-batching throughput: the engine's slot step run eagerly (use_graph=False,
    the static step's colour) vs replayed as graphs."""
    e = res["engine"]
    fig, ax = _figure(figsize=(5, 3.8))
    bars = ax.bar(["slot step, eagerly", "slot step, graph replay"],
                  [e["eager_tok_s"], e["graph_tok_s"]], color=[COLORS["static"], COLORS["graph"]])
    ax.bar_label(bars, fmt=sig3)
    ax.set_ylabel("throughput (generated tokens/s)")
    ax.set_title(f"{e['n_requests']} requests through {e['n_slots']} slots: graph decode serves\n"
                 f"{sig3(e['graph_tok_s'] / e['eager_tok_s'])}× the tokens/s of eager decode",
                 fontsize=10)
    return fig


# --- correctness, engine, training ----------------------------------------------------------

def logit_diff_figure(steps, max_diffs, flips=None):
    """Max |logit diff| per step between two paths (log scale; zero = bit-identical, not
    drawn). flips: steps where the greedy token differs (ints, or dicts with "step")."""
    s, d = np.asarray(steps), np.asarray(max_diffs, dtype=float)
    if s.shape != d.shape:
        raise ValueError(f"{len(s)} steps but {len(d)} differences")
    flip_steps = [f["step"] if isinstance(f, dict) else f for f in (flips or [])]
    fig, ax = _figure(figsize=(7, 3.5))
    ax.plot(s, np.where(d > 0, d, np.nan), ".-", color=COLORS["static"],
            label="max |logit difference|")
    if (d > 0).any():
        ax.set_yscale("log")
    for i, f in enumerate(flip_steps):
        ax.axvline(f, color=COLORS["current"], ls=":", lw=1, label="token flip" if i == 0 else None)
    ax.set(xlabel="decode step", ylabel="max |logit difference| (logits)")
    ax.legend(fontsize=8)
    equal = int((d == 0).sum())
    ax.set_title(f"Logits differ by at most {d.max():.2g} ({equal} of {len(d)} steps "
                 f"bit-identical); {len(flip_steps)} token flip{'s' * (len(flip_steps) != 1)}",
                 fontsize=10)
    return fig


def slot_segments(stats: list[dict], n_slots: int) -> list[tuple[int, int, int, int]]:
    """Engine.stats → (slot, request id, first step, n steps) for each stretch of
    consecutive steps a request holds a slot."""
    segments, current = [], {}
    for st in stats:
        if len(st["slots"]) != n_slots:
            raise ValueError(f"step {st['step']} lists {len(st['slots'])} slots, "
                             f"not n_slots {n_slots}")
        for slot, rid in enumerate(st["slots"]):
            seg = current.get(slot)
            if seg is not None and seg[1] == rid and seg[2] + seg[3] == st["step"]:
                seg[3] += 1
            elif rid is None:
                current.pop(slot, None)
            else:
                current[slot] = [slot, rid, st["step"], 1]
                segments.append(current[slot])
    return [tuple(seg) for seg in segments]


def slot_timeline_figure(stats: list[dict], n_slots: int):
    """Which request holds which slot at each decode step, and the active count and
    window under it. Each bar's gid is "request <id>"."""
    if not stats:
        raise ValueError("stats is empty: run the engine first")
    fig, (ax, ax2) = _figure(2, 1, sharex=True, height_ratios=[4, 1],
                             figsize=(9, 2.5 + 0.35 * n_slots))
    cycle = COLORS["requests"]
    for slot, rid, first, n in slot_segments(stats, n_slots):
        bar = ax.barh(slot, n, left=first - 0.5, height=0.8, color=cycle[rid % len(cycle)],
                      edgecolor="white")  # step s spans s ± 0.5
        bar.patches[0].set_gid(f"request {rid}")
        if n >= 3:
            ax.text(first - 0.5 + n / 2, slot, str(rid), ha="center", va="center", fontsize=7)
    ax.set(ylabel="slot", yticks=range(n_slots), ylim=(n_slots - 0.5, -0.5))
    steps = [st["step"] for st in stats]
    ax2.step(steps, [st["n_active"] for st in stats], where="mid", color=COLORS["current"])
    ax2.set(xlabel="decode step", ylabel="active\nslots", ylim=(0, n_slots + 0.5))
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    tw = ax2.twinx()
    tw.step(steps, [st["window"] for st in stats], where="mid", color=COLORS["graph"])
    tw.set_ylabel("window\n(keys)", color=COLORS["graph"])
    busy = sum(st["n_active"] for st in stats) / (n_slots * len(stats))
    n_req = len({rid for st in stats for rid in st["slots"] if rid is not None})
    ax.set_title(f"{n_req} requests share {n_slots} slots over {len(stats)} decode steps: "
                 f"slots busy {busy:.0%} of the time", fontsize=10)
    return fig


def loss_figure(history: dict):
    """Train and validation loss vs step, from a train log's "history"."""
    step, train, val = history["step"], history["train_loss"], history["val_loss"]
    best = int(np.argmin(val))
    fig, ax = _figure(figsize=(6, 4))
    ax.plot(step, train, color=COLORS["train"], label="train")
    ax.plot(step, val, color=COLORS["val"], label="validation")
    ax.axvline(step[best], color=COLORS["val"], ls=":", lw=1)
    ax.set(xlabel="training step", ylabel="cross-entropy (nats per byte)", yscale="log")
    ax.legend(fontsize=8)
    if best < len(val) - 1 and train[-1] < train[best]:
        title = (f"Validation loss is lowest at step {step[best]} ({sig3(val[best])}) while "
                 f"training loss keeps falling:\nlater steps overfit")
    else:
        title = f"Validation loss reaches {sig3(val[best])} at step {step[best]}"
    ax.set_title(title, fontsize=10)
    return fig


# --- one decode step, kernel by kernel (notebook 01) ----------------------------------------
# (anatomy.py counts the ops and groups the kernels; these draw them)

def kernels_figure(trace: dict, batch: int = 1, method: str = "eager", n_layers: int | None = None):
    """One traced decode step's kernels, counted by family."""
    runs = trace["batch"].get(str(batch))
    if runs is None or method not in runs:
        raise ValueError(f"batch {batch}, {method} was not traced")
    fam = kernel_families(runs[method])
    total = sum(fam.values())
    fig, ax = _figure(figsize=(7, 3.4))
    names = list(fam)[::-1]
    ax.bar_label(ax.barh(names, [fam[n] for n in names], color=COLORS[method]), padding=2)
    ax.set(xlabel="kernels in one decode step", xlim=(0, max(fam.values()) * 1.15))
    top = next(iter(fam))
    per = f", about {total / n_layers:.0f} per layer" if n_layers else ""
    ax.set_title(f"One {method} decode step at batch {batch} launches {total} kernels{per};\n"
                 f"{fam[top]} of them are {top}", fontsize=10)
    return fig


def floor_times(res: dict, batch: int = 1) -> dict[str, float]:
    """µs per step at `batch`: the bandwidth floor, the eager step's summed kernel time,
    the graph replay step and the eager step."""
    i = _batch_index(res["step_time"], batch)
    j = _batch_index(res["gpu_kernel_time"], batch)
    return {"floor": res["bandwidth"]["floor_us"],
            "kernels": res["gpu_kernel_time"]["eager_us"][j],
            "graph": res["step_time"]["graph_us"][i],
            "eager": res["step_time"]["eager_us"][i]}


def floor_figure(res: dict, batch: int = 1):
    """The bandwidth floor (weights read once at the measured copy bandwidth) against the
    measured step times, on a log axis."""
    t = floor_times(res, batch)
    labels = ["bandwidth floor:\nread every weight once", "eager: kernels'\nsummed run time",
              "graph replay:\nstep time", "eager:\nstep time"]
    fig, ax = _figure(figsize=(7, 3.8))
    bars = ax.bar(labels, list(t.values()),
                  color=[COLORS["current"], COLORS["eager"], COLORS["graph"], COLORS["eager"]])
    bars.patches[1].set_alpha(0.5)
    ax.bar_label(bars, labels=[f"{sig3(v)} µs" for v in t.values()], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"time per decode step, batch {batch} (µs)")
    ax.set_title(f"The eager step takes {sig3(t['eager'] / t['floor'])}× the bandwidth floor, "
                 f"graph replay {sig3(t['graph'] / t['floor'])}×:\nthe weights are not what "
                 f"it waits for", fontsize=10)
    return fig


# --- buckets: how many graphs for how little waste (notebook 03) ---------------------------

def bucket_tradeoff_figure(max_len: int, first: int = 128, growths=(8, 4, 2, 1.5, 1.25)):
    """Wasted attention work vs the number of graphs to capture."""
    rows = bucket_tradeoff(max_len, first, growths)
    fig, ax = _figure(figsize=(6, 4))
    x = [r["n_graphs"] for r in rows]
    y = [100 * r["wasted_share"] for r in rows]
    ax.plot(x, y, "o-", color=COLORS["graph"])
    for r, xi, yi in zip(rows, x, y):
        label = "one window" if r["growth"] is None else f"growth {r['growth']:g}"
        ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set(xlabel="graphs to capture (buckets)", ylabel="attention work on masked keys (%)",
           ylim=(0, max(y) * 1.15), xlim=(0, max(x) * 1.3))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    a, b, c = rows[0], next((r for r in rows if r["growth"] == 2), rows[len(rows) // 2]), rows[-1]
    ax.set_title(f"More graphs, less waste (max_len {max_len}, first bucket {first}):\n"
                 f"{a['n_graphs']} graph {a['wasted_share']:.0%}, {b['n_graphs']} graphs "
                 f"{b['wasted_share']:.0%}, {c['n_graphs']} graphs {c['wasted_share']:.0%}",
                 fontsize=10)
    return fig


# --- fusion and graphs (notebook 07) ---------------------------------------------------------

def fusion_figure(res: dict):
    """Step time of each variant of res["fusion"] (one run, batch 1), with its kernels per
    step and its set-up (compile and/or capture) time."""
    rows = res["fusion"]["rows"]
    color = {"eager": COLORS["eager"], "graph": COLORS["graph"], "reduce-overhead": COLORS["compiled"],
             "fused": COLORS["fused"]}
    names = [r["name"] for r in rows]
    fig, ax = _figure(figsize=(9, 0.9 + 0.55 * len(rows)))
    colors = [next(c for k, c in color.items() if n.startswith(k)) for n in names]
    bars = ax.barh(range(len(rows)), [r["step_us"] for r in rows], color=colors)
    labels = [f"{sig3(r['step_us'])} µs · {r['kernels']:.0f} kernels · set-up {sig3(r['setup_s'])} s"
              + (" · no CUDA graph" if r.get("cudagraph_skips") else "") for r in rows]
    ax.bar_label(bars, labels, padding=4, fontsize=8)
    ax.set_yticks(range(len(rows)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(right=max(r["step_us"] for r in rows) * 2.1)
    ax.set_xlabel(f"decode step time, batch {res['fusion']['batch']} (µs, median)")
    ratio = res["fusion"]["fused_over_gptfast"]
    ax.set_title(f"Fused kernels in bucketed graphs take {ratio:.2f}× the step time of "
                 f"gpt-fast-style reduce-overhead", fontsize=10)
    return fig
