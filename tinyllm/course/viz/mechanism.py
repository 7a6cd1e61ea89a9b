"""Pictures of the mechanism: a step's kernel launches (notebook 01), the static cache and its
window (02), the buckets (03), the shared memory pool (04) and the engine's slots (06).

Each is drawn from the book's own objects or arithmetic (scenes.py computes them), so that a
test can check that the picture is the thing: the cache grid is read off a real
StaticKVCache after a real decode step, the slots off a real Engine's stats, the windows off
tinyllm.graphs.bucket_windows. Sizes that need a GPU (launch and kernel times, pool bytes)
come from a recording, named under the figure, or are illustrative, and the figure says so.
"""

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from tinyllm.course.viz.scenes import (
    CELLS,
    ILLUSTRATIVE,
    ILLUSTRATIVE_LAUNCHES,
    ILLUSTRATIVE_POOLS,
    cache_cells,
    engine_slots_run,
    launch_schedule,
    slot_events,
    static_cache_step,
    walk_lengths,
)
from tinyllm.course.viz.style import COLORS, LABELS, MIB, label_source, new_figure, sig3
from tinyllm.course.viz.timing import MIN_BAR_SHARE, widened
from tinyllm.graphs import bucket_windows, resolve_buckets

# --- a decode step: a launch per kernel, or one launch for all (notebook 01) ----------------

LANES = {"eager cpu": 3, "eager gpu": 2, "graph cpu": 1, "graph gpu": 0}  # lane → y


def lane_label(lane: str) -> str:
    method, kind = lane.split()
    return f"{LABELS[method]}: " + ("CPU launches" if kind == "cpu" else "GPU kernels")


def launches_figure(costs: dict | None = None, zoom: int = 4):
    """A decode step as a row of kernels, each after its own CPU launch, against one graph
    launch that runs the same kernels back to back; below, the first `zoom` kernels of the
    eager step up close. costs: launch_costs(res), or a dict with its keys; None draws
    ILLUSTRATIVE_LAUNCHES. The footnote says where the numbers come from."""
    costs = ILLUSTRATIVE_LAUNCHES if costs is None else costs
    sched = launch_schedule(costs)
    n, L, K = costs["kernels"], costs["launch_us"], costs["kernel_us"]
    end = {m: sum(sched[f"{m} gpu"][-1]) for m in ("eager", "graph")}
    fig, (ax, zx) = new_figure(2, 1, figsize=(9, 4.8), height_ratios=[3, 2])
    min_width = MIN_BAR_SHARE * end["eager"]
    z = min(zoom, n)
    for a, lanes, widen in ((ax, LANES, min_width), (zx, ("eager cpu", "eager gpu"), 0.0)):
        for lane in lanes:
            m, kind = lane.split()
            h, alpha = (0.7, 1.0) if kind == "gpu" else (0.35, 0.6)
            # white edges between bars wide enough to keep their colour
            edged = a is zx or min(d for _, d in sched[lane]) >= 2 * min_width
            edge = {"edgecolor": "white", "lw": 0.5} if edged else {}
            y = (LANES[lane] - h / 2, h)
            bars = a.broken_barh(widened(sched[lane], widen), y, facecolors=COLORS[m], **edge)
            bars.set(alpha=alpha, gid=lane)
        a.set_yticks([LANES[x] for x in lanes], [lane_label(x) for x in lanes])
        for label, lane in zip(a.get_yticklabels(), lanes):
            label.set_color(COLORS[lane.split()[0]])
    ax.set(xlim=(0, end["eager"] * 1.01), xlabel="time since the step began (µs)")
    zx.set(xlim=(0, sum(sched["eager gpu"][z - 1]) + 0.2 * L), ylim=(1.4, 3.6))
    zx.set_xlabel("time since the step began (µs), up close")
    zx.set_title(f"The first {z} kernels of the eager step, up close", fontsize=9, loc="left")
    for k, (cs, cd) in enumerate(sched["eager cpu"][:z]):
        zx.text(cs + cd / 2, 3, f"launch {k + 1}", ha="center", va="center", fontsize=7)
    for (s0, d0), (s1, _) in zip(sched["eager gpu"][: z - 1], sched["eager gpu"][1:z]):
        if s1 > s0 + d0:
            arrow = {"arrowstyle": "<->", "color": COLORS["current"], "lw": 0.8}
            zx.annotate("", (s0 + d0, 2.45), (s1, 2.45), arrowprops=arrow)
            zx.text((s0 + d0 + s1) / 2, 2.5, "GPU idle", ha="center", va="bottom", fontsize=7)
    fig.suptitle(
        f"One graph launch runs all {n} kernels back to back; launched one by one, they "
        f"leave the GPU idle {1 - n * K / end['eager']:.0%} of the step\n(a model of the eager "
        f"step's kernels at their average cost: eager {sig3(end['eager'])} µs, the same kernels "
        f"replayed {sig3(end['graph'])} µs)",
        fontsize=10,
    )
    drawn = f"Drawn: {sig3(L)} µs to launch a kernel, {sig3(K)} µs to run it, one graph "
    drawn += f"launch {sig3(costs['graph_launch_us'])} µs"
    if K < min_width:
        drawn += f"; kernels widened to {sig3(min_width)} µs in the top panel to be seen"
    source = f"Numbers: {costs.get('source', 'as given')}."
    return label_source(fig, None, source, costs.get("how"), drawn + ".")


# --- the static cache and its window (notebook 02) ------------------------------------------


def static_cache_figure(step: dict | None = None):
    """The static KV cache as a grid (batch rows × positions) at one decode step: where
    index_copy_ writes (pos), and the fixed window the step attends over, with later keys
    and pad keys masked. step: scenes.static_cache_step(...) (the default runs it)."""
    step = static_cache_step() if step is None else step
    cells = cache_cells(step)
    B, L = cells.shape
    pos, W = step["pos"], step["window"]
    fig, ax = new_figure(figsize=(9, 2.6 + 0.3 * B))
    colors = ["white", COLORS["attended"], COLORS["masked"], COLORS["pad"]]
    ax.imshow(cells, cmap=ListedColormap(colors), vmin=0, vmax=3, aspect="auto")
    ax.set_xticks(np.arange(-0.5, L), minor=True)
    ax.set_yticks(np.arange(-0.5, B), minor=True)
    ax.grid(which="minor", color="0.8", lw=0.5)
    ax.tick_params(which="minor", length=0)
    for row, col in zip(*np.nonzero(np.asarray(step["written"]))):
        cell = Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, lw=2, ec=COLORS["current"])
        ax.add_patch(cell).set_gid(f"written {row} {col}")
    ax.axvline(W - 0.5, color=COLORS["graph"], lw=2, ls="--")
    ax.set(xlabel="key position in the cache (tokens)", ylabel="batch row", yticks=range(B))
    handles = [Patch(fc=c, ec="0.6", label=lab) for c, lab in zip(colors[1:], CELLS[1:])]
    writes = f"index_copy_ writes\nK/V at pos {pos}"
    handles.append(Patch(fill=False, ec=COLORS["current"], lw=2, label=writes))
    edge = f"end of the window:\nbucket {W}"
    handles.append(Line2D([], [], color=COLORS["graph"], lw=2, ls="--", label=edge))
    handles.append(Patch(fc="white", ec="0.6", label=CELLS[0]))
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    ax.set_title(
        f"Static KV cache at pos = {pos}: the step writes its keys in place at {pos} and reads\n"
        f"a fixed window of {W} of the {L} positions, with later keys and pad keys masked",
        fontsize=10,
    )
    return label_source(
        fig,
        None,
        "Read off a real StaticKVCache after one decode step on the CPU (toy model, "
        f"GraphDecoder(use_graph=False), buckets {tuple(step['buckets'])}, left pads "
        f"{tuple(step['first_valid'])}).",
    )


# --- buckets: a growing sequence walks through the windows (notebook 03) ---------------------


def buckets_figure(max_len: int = 1024, buckets=None, lengths=None):
    """A growing sequence at some of its lengths n (default scenes.walk_lengths): the keys
    it needs, and the window its graph attends over, the smallest bucket that holds n
    (tinyllm.graphs.bucket_windows). Each bucket's graph is captured at its first use and
    replayed for every later length it holds."""
    buckets = resolve_buckets(buckets, max_len)
    lengths = walk_lengths(buckets) if lengths is None else list(lengths)
    if any(not 1 <= n <= max_len for n in lengths):
        raise ValueError(f"lengths {lengths} must lie in [1, max_len {max_len}]")
    windows = bucket_windows(buckets, max_len)
    fig, ax = new_figure(figsize=(9, 1.6 + 0.42 * len(lengths)))
    seen = set()
    for y, n in enumerate(lengths):
        w = windows[n - 1]
        ax.barh(y, n, height=0.6, color=COLORS["attended"], gid=f"needed {n}")
        ax.barh(y, w - n, left=n, height=0.6, color=COLORS["wasted"], alpha=0.5, gid=f"masked {n}")
        frame = Rectangle((0, y - 0.35), w, 0.7, fill=False, ec=COLORS["graph"], lw=1.5)
        ax.add_patch(frame).set_gid(f"window {w}")
        what = "replayed" if w in seen else "captured (first use)"
        seen.add(w)
        text = f"graph {w}: {what}"
        ax.text(w + max_len * 0.01, y, text, va="center", fontsize=8, color=COLORS["graph"])
    for b in buckets:
        ax.axvline(b, color="0.75", lw=0.8, ls=":", zorder=0)
    ax.set_yticks(range(len(lengths)), [f"n = {n}" for n in lengths])
    ax.set_xticks(sorted({0, *buckets}))
    ax.set(ylim=(len(lengths) - 0.5, -0.5), xlim=(0, max_len * 1.36))
    ax.set(xlabel="key position (tokens)", ylabel="keys needed (length)")
    handles = [
        Patch(color=COLORS["attended"], label="keys needed: n"),
        Patch(color=COLORS["wasted"], alpha=0.5, label="masked keys computed"),
        Patch(fill=False, ec=COLORS["graph"], lw=1.5, label="graph: bucket window"),
    ]
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_title(
        f"A growing sequence walks through {len(buckets)} windows {tuple(buckets)}: each length "
        f"uses the smallest\nbucket that holds it, and each bucket's graph is captured once, "
        f"then replayed",
        fontsize=10,
    )
    return label_source(fig, None, "Windows from tinyllm.graphs.bucket_windows.")


# --- one memory pool for every graph (notebook 04) ------------------------------------------


def pool_figure(res: dict | None = None):
    """A pool per graph (stacked: their sizes add up) against one pool shared by every
    bucket's graph (the graphs replay one at a time, so their memory overlaps). Box sizes
    from res["capture"] (pool_bytes per window, shared_pool_bytes); without res,
    ILLUSTRATIVE_POOLS, labelled so."""
    cap = ILLUSTRATIVE_POOLS if res is None else res["capture"]
    own = [b / MIB for b in cap["pool_bytes"]]
    shared = cap["shared_pool_bytes"] / MIB
    fig, ax = new_figure(figsize=(7, 4.4))
    bottom = 0.0
    for w, size in zip(cap["windows"], own):
        box = Rectangle((0, bottom), 1, size, fc=COLORS["wasted"], ec="white", lw=2)
        ax.add_patch(box).set_gid(f"own pool {w}")
        text = f"graph {w}: {sig3(size)} MiB"
        ax.text(0.5, bottom + size / 2, text, ha="center", va="center", fontsize=8)
        bottom += size
    pool = Rectangle((1.6, 0), 1, shared, fc=COLORS["graph"], alpha=0.25, ec=COLORS["graph"], lw=2)
    ax.add_patch(pool).set_gid("shared pool")
    width = 0.8 / len(own)
    for i, (w, size) in enumerate(zip(cap["windows"], own)):
        x = 1.7 + i * width
        need = Rectangle((x, 0), width * 0.85, size, fill=False, ec=COLORS["graph"], lw=1.2)
        ax.add_patch(need).set_gid(f"graph {w} in shared pool")
        ax.text(x + width * 0.42, size, str(w), ha="center", va="bottom", fontsize=7)
    top = max(bottom, shared)
    ax.text(0.5, bottom, f"{sig3(bottom)} MiB", ha="center", va="bottom", fontsize=9)
    ax.text(2.1, shared + top * 0.05, f"{sig3(shared)} MiB", ha="center", va="bottom", fontsize=9)
    ticks = ["a pool per graph", "one pool shared by all graphs\n(each graph's own need inside)"]
    ax.set_xticks([0.5, 2.1], ticks)
    ax.set(xlim=(-0.2, 2.8), ylim=(0, top * 1.15), ylabel="graph pool memory (MiB)")
    verdict = (
        f"one shared pool holds {sig3(shared)} MiB, a pool each {sig3(bottom)} MiB"
        if shared < bottom
        else f"one shared pool ({sig3(shared)} MiB) saves nothing over a pool each here"
    )
    ax.set_title(
        f"{len(own)} graphs replay one at a time, so they can share one pool:\n{verdict}",
        fontsize=10,
    )
    what = "the recording's capture block" if res is not None else ILLUSTRATIVE
    return label_source(fig, res, f"Box heights: {what}.")


# --- the engine's slots (notebook 06) --------------------------------------------------------

ENDS = {"EOS": ("s", "released: emitted EOS"), "length": ("X", "released: max_new_tokens")}


def slots_figure(run: dict | None = None):
    """Slots over decode steps, from a real Engine run (scenes.engine_slots_run(...), the
    default): each request admitted into the lowest free slot, released on EOS or at its
    length, and the next queued request taking the freed slot at the next step."""
    run = engine_slots_run() if run is None else run
    events, n_slots = slot_events(run), run["n_slots"]
    fig, ax = new_figure(figsize=(9, 1.9 + 0.5 * n_slots))
    cycle, black = COLORS["requests"], COLORS["current"]
    for e in events:
        x0, x1, y = e["first"] - 0.5, e["first"] + e["n"] - 0.5, e["slot"]
        color = cycle[e["rid"] % len(cycle)]
        bar = ax.barh(y, e["n"], left=x0, height=0.7, color=color, edgecolor="white")
        bar.patches[0].set_gid(f"request {e['rid']}")
        ax.text(x0 + 0.6, y, f"request {e['rid']}", va="center", fontsize=8)
        ax.plot(x0 + 0.25, y, ">", color=black, ms=6, gid=f"admitted {e['rid']}")
        if e["end"]:
            ax.plot(x1 - 0.25, y, ENDS[e["end"]][0], color=black, ms=6, gid=f"end {e['end']}")
    lowest = all(e["lowest_free"] for e in events)
    ax.set(xlim=(-1, len(run["stats"]) + 0.5), ylim=(n_slots - 0.5, -0.5), yticks=range(n_slots))
    ax.set(xlabel="decode step", ylabel="slot")
    admitted = "admitted: lowest free slot" if lowest else "admitted"
    handles = [Line2D([], [], ls="", marker=">", color=black, label=admitted)]
    handles += [Line2D([], [], ls="", marker=m, color=black, label=t) for m, t in ENDS.values()]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncols=3, fontsize=8)
    count = {why: sum(e["end"] == why for e in events) for why in ENDS}
    took = sum(e["took_freed"] for e in events)
    ax.set_title(
        f"{len(events)} requests, {n_slots} slots: each enters "
        f"{'the lowest' if lowest else 'a'} free slot and leaves on EOS ({count['EOS']}) or "
        f"at its length ({count['length']});\n{took} queued requests take a slot freed "
        f"the step before",
        fontsize=10,
    )
    return label_source(
        fig,
        None,
        f"Engine.stats of a real Engine run on the CPU ({run['model']}, use_graph=False, "
        f"eos_id {run['eos_id']} = {run['eos']!r}).",
    )
