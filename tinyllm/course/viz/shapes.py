"""Figures of static shapes (notebooks 02, 03 and 06): the decode mask over a fixed window,
and the windows that buckets give a growing sequence."""

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from tinyllm.course.viz.style import COLORS, new_figure
from tinyllm.graphs import bucket_windows, default_buckets, resolve_buckets, wasted_share

# --- masks ------------------------------------------------------------------------------


def mask_figure(mask, pos: int | None = None, first_valid=None, title: str | None = None):
    """A (B, W) mask as an image: rows = batch rows, columns = key positions. The image
    array is the mask itself (1 = attended); pad keys and the current position are drawn
    on top of it."""
    m = np.asarray(mask, dtype=int)
    B, W = m.shape
    fig, ax = new_figure(figsize=(min(12, max(6, 1.2 + 0.3 * W)), 2 + 0.3 * B))
    ax.imshow(
        m,
        cmap=ListedColormap([COLORS["masked"], COLORS["attended"]]),
        vmin=0,
        vmax=1,
        aspect="auto",
    )
    handles = [
        Patch(color=COLORS["attended"], label="attended key"),
        Patch(color=COLORS["masked"], label="masked key"),
    ]
    if first_valid is not None:
        pad = np.arange(W)[None, :] < np.asarray(first_valid)[:, None]
        ax.imshow(
            np.ma.masked_where(~(pad & (m == 0)), m),
            cmap=ListedColormap([COLORS["pad"]]),
            aspect="auto",
        )
        handles.append(Patch(color=COLORS["pad"], label="pad key (masked)"))
    if pos is not None:
        ax.add_patch(Rectangle((pos - 0.5, -0.5), 1, B, fill=False, lw=2, ec=COLORS["current"]))
        handles.append(
            Patch(fill=False, ec=COLORS["current"], lw=2, label=f"current position {pos}")
        )
    if W <= 64:  # cell borders, while cells are big enough to see them
        ax.set_xticks(np.arange(-0.5, W), minor=True)
        ax.set_yticks(np.arange(-0.5, B), minor=True)
        ax.grid(which="minor", color="white", lw=0.5)
        ax.tick_params(which="minor", length=0)
    ax.set(xlabel="key position (tokens)", ylabel="batch row", yticks=range(B))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8)
    if title is None:
        title = (
            f"{int(m.sum())} of {m.size} (row, key) pairs attended"
            if pos is None
            else f"Position {pos}: all {W} keys are computed, later keys and pads masked"
        )
    ax.set_title(title, fontsize=10)
    return fig


# --- buckets ----------------------------------------------------------------------------


def bucket_figure(buckets, max_len: int):
    """Window vs keys needed: the gap to the exact-length diagonal is the wasted work."""
    buckets = resolve_buckets(buckets, max_len)
    n = np.arange(1, max_len + 1)
    w = np.array(bucket_windows(buckets, max_len))
    fig, ax = new_figure(figsize=(6, 4))
    ax.fill_between(
        n, n, w, step="pre", color=COLORS["wasted"], alpha=0.5, label="wasted: masked keys computed"
    )
    ax.plot(n, w, drawstyle="steps-pre", color=COLORS["graph"], label="graph: bucket window")
    ax.plot(n, n, color=COLORS["eager"], label="eager: exactly n keys")
    ax.set(
        xlabel="keys needed n = position + 1 (tokens)",
        ylabel="keys attended (tokens)",
        xlim=(0, max_len),
        ylim=(0, max_len * 1.02),
    )
    ax.legend(loc="upper left", fontsize=8)
    graphs = f"{len(buckets)} graph{'s' * (len(buckets) > 1)}"
    ax.set_title(
        f"{graphs}: {wasted_share(buckets, max_len):.0%} of attention work is on masked "
        f"keys\n(one {max_len}-key window: {wasted_share((max_len,), max_len):.0%})",
        fontsize=10,
    )
    return fig


# --- buckets: how many graphs for how little waste (notebook 03) ---------------------------


def bucket_tradeoff(max_len: int, first: int = 128, growths=(8, 4, 2, 1.5, 1.25)) -> list[dict]:
    """One window of max_len keys, then default_buckets(max_len, first, g) for each growth g:
    {"growth", "buckets", "n_graphs", "wasted_share"} each (growth None for one window)."""
    rows = [{"growth": None, "buckets": (max_len,)}]
    rows += [{"growth": g, "buckets": default_buckets(max_len, first, g)} for g in growths]
    for r in rows:
        r["n_graphs"] = len(r["buckets"])
        r["wasted_share"] = wasted_share(r["buckets"], max_len)
    return rows


def bucket_tradeoff_figure(max_len: int, first: int = 128, growths=(8, 4, 2, 1.5, 1.25)):
    """Wasted attention work vs the number of graphs to capture."""
    rows = bucket_tradeoff(max_len, first, growths)
    fig, ax = new_figure(figsize=(6, 4))
    x = [r["n_graphs"] for r in rows]
    y = [100 * r["wasted_share"] for r in rows]
    ax.plot(x, y, "o-", color=COLORS["graph"])
    for r, xi, yi in zip(rows, x, y):
        label = "one window" if r["growth"] is None else f"growth {r['growth']:g}"
        ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set(
        xlabel="graphs to capture (buckets)",
        ylabel="attention work on masked keys (%)",
        ylim=(0, max(y) * 1.15),
        xlim=(0, max(x) * 1.3),
    )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    a, b, c = rows[0], next((r for r in rows if r["growth"] == 2), rows[len(rows) // 2]), rows[-1]
    ax.set_title(
        f"More graphs, less waste (max_len {max_len}, first bucket {first}):\n"
        f"{a['n_graphs']} graph {a['wasted_share']:.0%}, {b['n_graphs']} graphs "
        f"{b['wasted_share']:.0%}, {c['n_graphs']} graphs {c['wasted_share']:.0%}",
        fontsize=10,
    )
    return fig
