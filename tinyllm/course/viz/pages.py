"""Pictures of the paged cache and the paged section's recordings (notebook 08).

pages_scene runs the book's own PagedKVCache through a short history (rows admitted with
their prompts, decode steps, a release, compaction) and returns what the cache holds;
pages_figure draws it: the block table beside the pool of blocks. The recorded figures draw
results/h200_paged.json (tinyllm.lab.results.load_paged), beside results/h200.json's
windowed sweep where the message needs it.
"""

import numpy as np
from matplotlib.patches import Rectangle

from tinyllm.course.viz.style import COLORS, label_source, new_figure, sig3
from tinyllm.lab.pages import bin_spans, long_over_short
from tinyllm.paged import PagedKVCache


def pages_scene(prompt_lens=(5, 9, 3), block_size: int = 4, steps: int = 0,
                release: int | None = None, compact: bool = False, max_len: int = 32,
                n_blocks: int | None = None) -> dict:  # fmt: skip
    """A PagedKVCache of one layer and len(prompt_lens) rows after: each row with a
    non-zero prompt length admitted (its prompt's blocks taken), `steps` decode steps of
    every row (cache.grow(), the step's end_step on the device, advance_host()), then row
    `release` released, then (compact) each free row below the last request takes it
    (rows.compaction() and rows.move(), as PagedEngine.step does after its admissions). Returns the
    host and device state, and each block's owner (a row, or None) and how many of its
    positions hold keys."""
    n_rows = len(prompt_lens)
    cache = PagedKVCache(1, n_rows, max_len, "cpu", block_size=block_size, n_blocks=n_blocks)
    rows = cache.rows
    admitted = [row for row, n in enumerate(prompt_lens) if n]
    if admitted:
        lens = [prompt_lens[row] for row in admitted]
        rows.take(admitted, lens)
        rows.admit(admitted, lens)
    for _ in range(steps):
        cache.grow()  # rows.grow(), then rows.flush(): the device's table before the step
        cache.decoding(n_rows).end_step(1)  # what the step does to lens_dev, on the device
        rows.advance_host()
    if release is not None and rows.active[release]:
        rows.release([release])
    if compact:
        src, dst = rows.compaction()
        if len(src):
            rows.move(src, dst)
    rows.flush()  # the device in step: what a step after these changes would read
    owner, filled = [None] * cache.n_blocks, [0] * cache.n_blocks
    for row, table in enumerate(cache.tables):
        for i, block in enumerate(table):
            owner[block] = row
            filled[block] = min(block_size, max(0, cache.lens[row] - i * block_size))
    return {
        "block_size": block_size,
        "n_blocks": cache.n_blocks,
        "lens": list(cache.lens),
        "lens_dev": rows.lens_dev.tolist(),
        "active": list(cache.active),
        "tables": [list(t) for t in cache.tables],
        "block_table": rows.block_table.tolist(),
        "free": list(cache.free),
        "owner": owner,
        "filled": filled,
    }


def _row_color(row: int) -> str:
    return COLORS["requests"][row % len(COLORS["requests"])]


def pages_figure(scene: dict):
    """The block table (rows × table entries, each the block id it holds) beside the pool
    (every block, coloured by the row that holds it, shaded by how full it is; block 0 the
    scratch block, white where no key is yet: a free block, or the unused part of a held one)."""
    table = np.array(scene["block_table"])
    n_rows, width = table.shape
    bs, n_blocks = scene["block_size"], scene["n_blocks"]
    fig, (ax_t, ax_p) = new_figure(1, 2, figsize=(10, 3.6), width_ratios=(1, 1.4))
    for r in range(n_rows):
        held = len(scene["tables"][r])
        for i in range(width):
            color = _row_color(r) if i < held else "white"
            ax_t.add_patch(
                Rectangle((i, r), 1, 1, fc=color, ec="0.6", alpha=0.7 if i < held else 1)
            )
            ax_t.text(i + 0.5, r + 0.5, str(table[r, i]), ha="center", va="center", fontsize=7,
                      color="black" if i < held else "0.6")  # fmt: skip
    ax_t.set(xlim=(0, width), ylim=(n_rows, 0),
             xlabel=f"table entry i: positions {bs}·i to {bs}·i + {bs - 1}")  # fmt: skip
    ax_t.set_yticks([r + 0.5 for r in range(n_rows)],
                    [f"row {r}: len {n}" for r, n in enumerate(scene["lens"])])  # fmt: skip
    ax_t.set_xticks([])
    ax_t.set_title("block_table (device): row → its blocks", fontsize=9)
    cols = min(n_blocks, 16)
    for b in range(n_blocks):
        x, y = b % cols, b // cols
        row = scene["owner"][b]
        if b == 0:
            ax_p.add_patch(Rectangle((x, y), 1, 1, fc=COLORS["masked"], ec="0.4", hatch="//"))
        elif row is None:
            ax_p.add_patch(Rectangle((x, y), 1, 1, fc="white", ec="0.6"))
        else:
            full = scene["filled"][b] / bs
            ax_p.add_patch(Rectangle((x, y), 1, 1, fc="white", ec="0.4"))
            ax_p.add_patch(Rectangle((x, y + 1 - full), 1, full, fc=_row_color(row), ec="0.4"))
        ax_p.text(x + 0.5, y + 0.5, "S" if b == 0 else str(b), ha="center", va="center",
                  fontsize=7)  # fmt: skip
    ax_p.set(xlim=(0, cols), ylim=(-(-n_blocks // cols), 0), xticks=[], yticks=[])
    ax_p.set_title(
        f"the pool: {n_blocks} blocks of {bs} positions; S: scratch block 0; white: no key yet",
        fontsize=9,
    )
    held = sum(len(t) for t in scene["tables"])
    fig.suptitle(
        f"{sum(scene['active'])} requests hold {held} blocks, {len(scene['free'])} are free; "
        f"a row's keys sit in whichever blocks it was handed",
        fontsize=10,
    )
    return fig


# --- the recordings -------------------------------------------------------------------------


def paged_sweep_figure(paged: dict):
    """Step time against position, each step replayed alone (paged, results/h200_paged.json):
    the windowed graphs climb their bucket staircase, the paged step stays nearly flat."""
    sw = paged["paged"]["sweep"]
    fig, ax = new_figure(figsize=(8, 3.8))
    lines = (
        ("windowed", "windowed, unfused (bucketed)", COLORS["graph"], ":"),
        ("windowed fused", "windowed, fused kernels (bucketed)", COLORS["fused"], ":"),
        ("paged", "paged, unfused", COLORS["graph"], "-"),
        ("paged fused", "paged, fused kernels", COLORS["fused"], "-"),
    )
    for key, label, color, ls in lines:  # unfused wide and pale, so fused drawn on it shows
        lw, alpha = (1.2, 1.0) if "fused" in key else (3.5, 0.45)
        ax.plot(sw["positions"], sw[f"{key}_us"], drawstyle="steps-post", color=color, ls=ls,
                label=label, lw=lw, alpha=alpha)  # fmt: skip
    top = max(max(sw[f"{k}_us"]) for k, *_ in lines)
    ax.set(xlabel="position (tokens)", ylim=(0, 1.55 * top),
           ylabel=f"step time, batch 1 (µs, mean per {sw['bin_size']} positions)")  # fmt: skip
    ax.legend(fontsize=7, loc="upper left", ncols=2)  # above the lines, hiding none
    short, long = bin_spans(sw)
    ax.set_title(
        f"Each step replayed alone, from positions {short} to {long}:\nthe windowed fused "
        f"step grows {sig3(long_over_short(sw, 'windowed fused'))}×, the paged fused step "
        f"{sig3(long_over_short(sw, 'paged fused'))}×",
        fontsize=10,
    )
    return label_source(fig, paged)


def attention_figure(paged: dict, batch: str = "1"):
    """The attention call alone against the number of keys n: SDPA in the course's window
    form over a window of n keys, the paged kernel over n keys in blocks, and the paged step's
    op with its combine kernel (rope_write_attend: RoPE, the new key's write and the
    attention, its splits set by the batch)."""
    att = paged["paged"]["attention"]
    batch = recorded_batch([k for k in att if k.isdigit()], batch)
    t = att[batch]
    fig, ax = new_figure(figsize=(6.5, 3.6))
    ax.plot(att["lengths"], t["sdpa_window_us"], "o-", color=COLORS["graph"],
            label="SDPA, window form (n keys, additive bias)")  # fmt: skip
    ax.plot(att["lengths"], t["paged_kernel_us"], "s-", color=COLORS["fused"],
            label=f"paged_decode_attention (blocks of {att['block_size']})")  # fmt: skip
    op = t["fused_op_us"]
    ax.plot(att["lengths"], op, "^--", color=COLORS["fused"],
            label="rope_write_attend and its combine")  # fmt: skip
    ax.set(xlabel="keys attended", ylabel=f"one call, batch {batch} (µs)", ylim=(0, None))
    ax.legend(fontsize=8)
    ratio = t["sdpa_window_us"][-1] / t["paged_kernel_us"][-1]
    ax.set_title(
        f"At {att['lengths'][-1]} keys, batch {batch}, the paged kernel is {sig3(ratio)}× as "
        f"fast as SDPA;\nrope_write_attend takes {sig3(min(op))} to {sig3(max(op))} µs across "
        f"the lengths",
        fontsize=10,
    )
    return label_source(fig, paged, f"each call inside a graph, {att['calls']} calls back to back")


def recorded_batch(batches, batch) -> str:
    """batch as a recording names it: one of its batches (strings), else a ValueError that
    lists them (a notebook's knob)."""
    if str(batch) not in batches:
        named = " and ".join(repr(b) for b in sorted(batches, key=int))
        raise ValueError(f"batch {batch!r}: this recording holds batch {named} only")
    return str(batch)


def swept(rec: dict, batch) -> str:
    """batch as rec's sweeps name it (recorded_batch over its sweep_<batch> parts)."""
    return recorded_batch([k.removeprefix("sweep_") for k in rec if k.startswith("sweep_")], batch)


def two_sweeps(rec: dict, batch: str, lines, how):
    """Two recorded sweeps of the paged fused step against position, lines ((name in
    rec["sweep_<batch>"], label), (..., ...)), from the second bin on: the first holds the
    steps right after the prefill, slower in every line (notebook 08, section 1). The title:
    each line's rise, how (the first's label, the second's) words it."""
    batch = swept(rec, batch)
    fig, ax = new_figure(figsize=(8, 3.6))
    rises = []
    for (name, label), color in zip(lines, (COLORS["graph"], COLORS["fused"]), strict=True):
        sw = rec[f"sweep_{batch}"][name]
        rises.append(sig3(long_over_short(sw, "paged fused")))
        ax.plot(sw["positions"][1:], sw["paged fused_us"][1:], drawstyle="steps-post",
                color=color, label=label)  # fmt: skip
    short, long = bin_spans(sw)
    ax.set(xlabel="position (tokens)",
           ylabel=f"mean step over {sw['bin_size']} positions,\nbatch {batch} (µs)")  # fmt: skip
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Batch {batch}: from positions {short} to {long}, the step grew "
                 f"{rises[0]}× {how[0]}, {rises[1]}× {how[1]}", fontsize=10)  # fmt: skip
    return label_source(fig, rec)


def splits_figure(splits: dict, batch: str = "1"):
    """The paged fused step against position with 16 splits a row (the rule then) and with
    64 (the run of results/h200_splits.json)."""
    # each line: the recording's name for its run, the figure's label
    lines = (("16 shares (the package)", "16 splits (the rule then)"), ("64 shares", "64 splits"))
    return two_sweeps(splits, batch, lines, ("with 16 splits", "with 64"))


def lowest_lines(sweeps: dict) -> list[tuple[str, int]]:
    """Which sweep's line is lowest, from the second bin on: [(name, last position), ...], a
    pair for each run of bins where the same line is lowest."""
    first = next(iter(sweeps.values()))
    size, runs = first["bin_size"], []
    for i, start in enumerate(first["positions"][1:], 1):
        low = min(sweeps, key=lambda name: sweeps[name]["paged fused_us"][i])
        if runs and runs[-1][0] == low:
            runs[-1] = (low, start + size - 1)
        else:
            runs.append((low, start + size - 1))
    return runs


# each form's colour, the same at every batch
SPLITS_COLORS = {"package": COLORS["graph"], "16 splits": COLORS["compiled"],
                 "8 splits": COLORS["fused"], "4 splits": COLORS["static"],
                 "2 splits": COLORS["eager"]}  # fmt: skip


def short_rows_figure(rec: dict, batch: str = "8"):
    """The paged fused step against position with the rule's splits and with fewer, as a
    second graph for short rows would capture it (results/h100_short_rows.json, an H100's
    run), from the second bin on. The title: the lowest line, run by run of positions."""
    batch = swept(rec, batch)
    sweeps = rec[f"sweep_{batch}"]
    rule = f"the rule, {rec['package_splits'][batch]} splits"
    label = {name: rule if name == "package" else name for name in sweeps}
    fig, ax = new_figure(figsize=(8, 3.6))
    for name, sw in sweeps.items():
        ax.plot(sw["positions"][1:], sw["paged fused_us"][1:], drawstyle="steps-post",
                color=SPLITS_COLORS[name], label=label[name])  # fmt: skip
    ax.set(xlabel="position (tokens)",
           ylabel=f"mean step over {sw['bin_size']} positions,\nbatch {batch} (µs)")  # fmt: skip
    ax.legend(fontsize=8, loc="upper left")
    runs = lowest_lines(sweeps)
    if runs[-1][0] == "package" and len(runs) > 1:
        below = list(dict.fromkeys(name for name, _ in runs[:-1]))  # in the order they come
        start = runs[-2][1] + 1
        title = (f"Batch {batch}: the rule's {rec['package_splits'][batch]} splits lowest "
                 f"from position {start} on; below {start}, {' or '.join(below)}")  # fmt: skip
    else:
        title = f"Batch {batch}, the lowest line: " + ", ".join(
            f"{label[name]} to {last}" for name, last in runs
        )
    ax.set_title(title, fontsize=10)
    return label_source(fig, rec)


def tensor_cores_figure(dot: dict, batch: str = "8"):
    """The paged fused step against position with the fused kernel before its tensor cores
    and now (the run of results/h200_dot.json): at batch 1 now takes the same sums."""
    batch = swept(dot, batch)
    dot_now = dot["op_alone_us"][f"batch {batch}, 128 keys"]["tensor_cores"]
    now = "now: tensor cores" if dot_now else "now: the same sums of products"
    lines = (("before (76ed87c)", "before: sums of products"), ("now", now))
    return two_sweeps(dot, batch, lines, ("before", "now"))
