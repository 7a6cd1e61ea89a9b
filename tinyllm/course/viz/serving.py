"""Figures of what decoding produces (notebooks 00, 05 and 06): logit differences between two
paths, the engine's slot timeline and throughput, and the shipped model's training loss."""

import numpy as np
from matplotlib.ticker import MaxNLocator

from tinyllm.course.viz.style import COLORS, label_source, new_figure, sig3

# --- correctness, engine, training ----------------------------------------------------------


def logit_diff_figure(steps, max_diffs, flips=None, recording: dict | None = None):
    """Max |logit diff| per step between two paths (log scale; zero = bit-identical, not
    drawn). flips: steps where the greedy token differs (ints, or dicts with "step").
    recording: the results dict the differences come from, if any (its provenance label
    goes under the figure)."""
    s, d = np.asarray(steps), np.asarray(max_diffs, dtype=float)
    if s.shape != d.shape:
        raise ValueError(f"{len(s)} steps but {len(d)} differences")
    flip_steps = [f["step"] if isinstance(f, dict) else f for f in (flips or [])]
    fig, ax = new_figure(figsize=(7, 3.5))
    ax.plot(
        s, np.where(d > 0, d, np.nan), ".-", color=COLORS["static"], label="max |logit difference|"
    )
    if (d > 0).any():
        ax.set_yscale("log")
    for i, f in enumerate(flip_steps):
        ax.axvline(f, color=COLORS["current"], ls=":", lw=1, label="token flip" if i == 0 else None)
    ax.set(xlabel="decode step", ylabel="max |logit difference| (logits)")
    ax.legend(fontsize=8)
    equal = int((d == 0).sum())
    ax.set_title(
        f"Logits differ by at most {d.max():.2g} ({equal} of {len(d)} steps "
        f"bit-identical); {len(flip_steps)} token flip{'s' * (len(flip_steps) != 1)}",
        fontsize=10,
    )
    return label_source(fig, recording)


def slot_segments(stats: list[dict], n_slots: int) -> list[tuple[int, int, int, int]]:
    """Engine.stats → (slot, request id, first step, n steps) for each stretch of
    consecutive steps a request holds a slot."""
    segments, current = [], {}
    for st in stats:
        if len(st["slots"]) != n_slots:
            raise ValueError(
                f"step {st['step']} lists {len(st['slots'])} slots, not n_slots {n_slots}"
            )
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
    fig, (ax, ax2) = new_figure(
        2, 1, sharex=True, height_ratios=[4, 1], figsize=(9, 2.5 + 0.35 * n_slots)
    )
    cycle = COLORS["requests"]
    for slot, rid, first, n in slot_segments(stats, n_slots):
        bar = ax.barh(
            slot, n, left=first - 0.5, height=0.8, color=cycle[rid % len(cycle)], edgecolor="white"
        )  # step s spans s ± 0.5
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
    tw.set_yticks(sorted({st["window"] for st in stats}))  # the buckets the steps ran in
    busy = sum(st["n_active"] for st in stats) / (n_slots * len(stats))
    n_req = len({rid for st in stats for rid in st["slots"] if rid is not None})
    ax.set_title(
        f"{n_req} requests share {n_slots} slots over {len(stats)} decode steps: "
        f"slots busy {busy:.0%} of the time",
        fontsize=10,
    )
    return fig


def loss_figure(history: dict):
    """Train and validation loss vs step, from a train log's "history"."""
    step, train, val = history["step"], history["train_loss"], history["val_loss"]
    best = int(np.argmin(val))
    fig, ax = new_figure(figsize=(6, 4))
    ax.plot(step, train, color=COLORS["train"], label="train")
    ax.plot(step, val, color=COLORS["val"], label="validation")
    ax.axvline(step[best], color=COLORS["val"], ls=":", lw=1)
    ax.set(xlabel="training step", ylabel="cross-entropy (nats per byte)", yscale="log")
    ax.legend(fontsize=8)
    if best < len(val) - 1 and train[-1] < train[best]:
        title = (
            f"Validation loss is lowest at step {step[best]} ({sig3(val[best])}) while "
            f"training loss keeps falling:\nlater steps overfit"
        )
    else:
        title = f"Validation loss reaches {sig3(val[best])} at step {step[best]}"
    ax.set_title(title, fontsize=10)
    return fig


def engine_figure(res: dict):
    """Continuous-batching throughput: the engine's slot step run eagerly (use_graph=False,
    the static step's colour) vs replayed as graphs."""
    e = res["engine"]
    fig, ax = new_figure(figsize=(5, 3.8))
    bars = ax.bar(
        ["slot step, eagerly", "slot step, graph replay"],
        [e["eager_tok_s"], e["graph_tok_s"]],
        color=[COLORS["static"], COLORS["graph"]],
    )
    ax.bar_label(bars, fmt=sig3)
    ax.set_ylabel("throughput (generated tokens/s)")
    ax.set_title(
        f"{e['n_requests']} requests through {e['n_slots']} slots: graph decode serves\n"
        f"{sig3(e['graph_tok_s'] / e['eager_tok_s'])}× the tokens/s of eager decode",
        fontsize=10,
    )
    return label_source(fig, res)
