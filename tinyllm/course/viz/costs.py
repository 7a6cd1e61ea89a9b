"""Figures of what a decode step costs (notebooks 01, 03 and 07): the course's steps beside
the peers, the cost model (µs against kernels), the kernel diet stage by stage, step time
against position and against the window, and where reduce-overhead's host time goes, each
drawn from results/<gpu>.json (and results/<gpu>_diet.json); and a picture of the two ways
to replay compiled kernels (notebook 07)."""

import numpy as np
from matplotlib.patches import Patch, Rectangle

from tinyllm.course.viz.style import COLORS, label_source, new_figure, sig3
from tinyllm.lab.peers import host_categories, reused_compile


def row_color(name: str) -> str:
    """One colour per kind of step, as in every notebook."""
    for prefix, key in (
        ("eager", "eager"),
        ("static", "static"),
        ("graph", "graph"),
        ("fused", "fused"),
        ("reduce-overhead", "compiled"),
        ("gpt-fast", "compiled"),
    ):
        if name.startswith(prefix):
            return COLORS[key]
    return COLORS["wasted"]


def peers_figure(res: dict):
    """Step time of each variant of res["fusion"] (batch 1, window 128, one run), with its
    min–max over the repeats, its kernels per step and its set-up time."""
    f = res["fusion"]
    rows = f["rows"]
    med = [r["step_us"]["median"] for r in rows]
    err = np.array(
        [
            [m - r["step_us"]["min"] for m, r in zip(med, rows)],
            [r["step_us"]["max"] - m for m, r in zip(med, rows)],
        ]
    )
    fig, ax = new_figure(figsize=(10, 0.9 + 0.5 * len(rows)))
    y = np.arange(len(rows))
    bars = ax.barh(y, med, xerr=err, color=[row_color(r["name"]) for r in rows], error_kw={"lw": 1})
    reused = reused_compile(rows)
    labels = [
        f"{sig3(m)} µs · {r['kernels']:.0f} kernels · set-up {sig3(r['setup_s'])} s"
        + (" · no CUDA graph" if r.get("cudagraph_skips") else "")
        + (" · reused an earlier compile: not its settings" if r["name"] in reused else "")
        for m, r in zip(med, rows)
    ]
    ax.bar_label(bars, labels, padding=4, fontsize=7)
    ax.set_yticks(y, [r["name"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(med) / 2, max(med) * 60)  # room for the longest label
    ax.set_xlabel(f"decode step time, batch {f['batch']} (µs, median over repeats, log scale)")
    h = res.get("headline")
    ratio = (
        f"{sig3(h['best_over_gptfast'])}× the step of gpt-fast's strongest form, in its loop on "
        "this host (one run)"
        if h
        else ""
    )
    best = next(r for r in rows if r["name"] == "fused kernels in bucketed graphs")
    ax.set_title(
        f"Fused kernels in the course's bucketed graphs: {sig3(best['step_us']['median'])}"
        f" µs per step\n{ratio}",
        fontsize=10,
    )
    return label_source(fig, res)


def fitted_names(res: dict) -> set[str]:
    """Names of the points the cost model was fitted over (the course's replayed steps, diet
    stages)."""
    return {p["name"] for p in res["cost_model"]["points"]}


def fit_text(fit: dict) -> str:
    """'12.3 µs + 1.05 µs × kernels' (a minus sign where the slope is negative)."""
    a, b = fit["a_us"], fit["b_us_per_kernel"]
    return f"{sig3(a)} µs {'+' if b >= 0 else '−'} {sig3(abs(b))} µs × kernels"


def cost_model_title(fit: dict) -> str:
    """The figure's message, read from the fit: a cost per kernel, or none found."""
    a, b = fit["a_us"], fit["b_us_per_kernel"]
    worst = max((abs(r) for r in fit["residuals_us"].values()), default=0.0)
    if b <= 0:
        return (
            f"In this recording a replayed step does not get slower with more kernels:\n"
            f"fit {fit_text(fit)}"
        )
    return (
        f"A replayed step costs about {sig3(a)} µs + {sig3(b)} µs per kernel\n"
        f"(points up to {sig3(worst)} µs off the line): fewer kernels, faster steps"
    )


def cost_model_figure(res: dict, diet: dict | None = None):
    """µs per step against kernels per step for every variant measured (filled: the course's
    replayed steps, in the fit; hollow: steps whose time the host sets, eager or gpt-fast's
    guarded replay, not in the fit) and the diet's stages, the fitted line
    µs = a + b·kernels (drawn through a + b·k at every kernel count k of the points), and the
    bandwidth floor."""
    fig, ax = new_figure(figsize=(7, 4.4))
    fitted = fitted_names(res)
    for r in res["fusion"]["rows"]:
        inside = r["name"] in fitted
        ax.scatter(
            r["kernels"],
            r["step_us"]["median"],
            color=row_color(r["name"]) if inside else "none",
            edgecolor=row_color(r["name"]) if not inside else "black",
            s=30,
            lw=1 if not inside else 0.4,
            zorder=3,
            gid=f"{'fit' if inside else 'out'} {r['name']}",
        )
    for stage in (diet or {}).get("stages", []):
        g = stage["batch"]["1"]["graph"]
        ax.scatter(
            g["kernels"],
            g["step_us"]["median"],
            marker="s",
            s=24,
            color=COLORS["graph"],
            alpha=0.5,
            zorder=2,
            gid=f"diet {stage['stage']}",
        )
        ax.annotate(
            stage["stage"],
            (g["kernels"], g["step_us"]["median"]),
            fontsize=7,
            textcoords="offset points",
            xytext=(4, -8),
        )
    fit = res["cost_model"]["fit"]
    # a straight line in µs is a curve on the log axis: drawn on a dense grid of kernel
    # counts that holds every point's own, so a point with no residual lies on it
    ks = [p["kernels"] for p in res["cost_model"]["points"]]
    k = np.union1d(np.linspace(0, max(ks) * 1.1, 200), ks)
    ax.plot(
        k,
        fit["a_us"] + fit["b_us_per_kernel"] * k,
        color=COLORS["current"],
        ls="--",
        lw=1,
        label=f"fit over the filled points: {fit_text(fit)}\n"
        "(a straight line, bent by the log axis)",
        gid="fit",
    )
    if "bandwidth" in res:
        ax.axhline(
            res["bandwidth"]["floor_us"],
            color=COLORS["wasted"],
            lw=1,
            label=f"bandwidth floor {sig3(res['bandwidth']['floor_us'])} µs",
        )
    ax.set_yscale("log")
    ax.set(xlabel="kernels per step", ylabel="step time at batch 1 (µs, median, log scale)")
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Patch(color=COLORS[k], label=lab)
        for k, lab in (
            ("eager", "eager"),
            ("static", "static, run eagerly"),
            ("graph", "graph replay (squares: diet stages)"),
            ("fused", "fused kernels"),
            ("compiled", "torch.compile / gpt-fast"),
        )
    ]
    handles.append(
        Patch(fc="none", ec="black", label="hollow: not in the fit (the host sets their time)")
    )
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_title(cost_model_title(fit), fontsize=10)
    return label_source(fig, res)


def diet_figure(diet: dict, batch: str = "1"):
    """Kernels per step and graph-replayed step time after each stage of the kernel diet."""
    stages = diet["stages"]
    names = [s["stage"] for s in stages]
    g = [s["batch"][batch]["graph"] for s in stages]
    fig, (a1, a2) = new_figure(1, 2, figsize=(9, 3.4))
    a1.bar(names, [x["kernels"] for x in g], color=COLORS["graph"])
    a1.bar_label(a1.containers[0], fmt="%d", fontsize=8)
    a1.set(ylabel="kernels per step", title="Kernels per step")
    a1.margins(y=0.08)  # room for the tallest bar's label
    med = [x["step_us"]["median"] for x in g]
    a2.bar(
        names,
        med,
        color=COLORS["graph"],
        yerr=[
            [m - x["step_us"]["min"] for m, x in zip(med, g)],
            [x["step_us"]["max"] - m for m, x in zip(med, g)],
        ],
    )
    a2.bar_label(
        a2.containers[1] if len(a2.containers) > 1 else a2.containers[0], fmt="%.0f", fontsize=8
    )
    a2.set(ylabel=f"graph replay, batch {batch} (µs)", title="Step time")
    fig.suptitle(
        f"The kernel diet: {g[0]['kernels']:.0f} → {g[-1]['kernels']:.0f} kernels, "
        f"{sig3(med[0])} → {sig3(med[-1])} µs per replayed step",
        fontsize=10,
    )
    return label_source(fig, diet)


def sweep_wins(res: dict) -> dict:
    """Where the fused bucketed graphs beat gpt-fast's whole-cache graph in the position
    sweep: the first position of every bin where they are faster, their share of the bins,
    and the positions gpt-fast's cache holds."""
    sw = res["position_sweep"]
    wins = [p for p, f, g in zip(sw["positions"], sw["fused_us"], sw["gpt-fast_us"]) if f < g]
    max_len = res.get("operating_point", {}).get("max_len")
    return {"positions": wins, "share": len(wins) / len(sw["positions"]), "max_len": max_len}


def sweep_figure(res: dict):
    """Step time against position: the bucketed graphs step up at each bucket edge; gpt-fast,
    in its loop on this host, replays a graph over the whole cache at every position."""
    sw = res["position_sweep"]
    wins = sweep_wins(res)
    cache = f"a {wins['max_len']}-position cache" if wins["max_len"] else "its whole cache"
    fig, ax = new_figure(figsize=(8, 3.8))
    for key, label, color in (
        ("graph", "graph replay, unfused, bucketed", COLORS["graph"]),
        ("fused", "fused kernels, bucketed graphs", COLORS["fused"]),
        (
            "gpt-fast",
            f"gpt-fast in its loop on this host (forward only, static tables), {cache}",
            COLORS["compiled"],
        ),
    ):
        ax.plot(sw["positions"], sw[f"{key}_us"], drawstyle="steps-post", color=color, label=label)
    for w in res.get("operating_point", {}).get("buckets", [])[:-1]:
        ax.axvline(w, color=COLORS["wasted"], lw=0.6, ls=":")
    ax.set(
        xlabel="position (tokens)",
        ylabel=f"step time, batch 1 (µs, median per {sw['bin_size']} positions)",
        ylim=(0, None),
    )
    ax.legend(fontsize=8)
    if not wins["positions"]:
        title = f"gpt-fast in its loop, over {cache}, was faster at every position measured"
    else:
        title = (
            f"The fused bucketed graphs beat gpt-fast in its loop, over {cache},\n"
            f"at {wins['share']:.0%} of the positions measured"
        )
    ax.set_title(title, fontsize=10)
    return label_source(fig, res)


BREAKDOWN_PARTS = ("guards", "input copies", "graph launch", "other")


def breakdown_figure(res: dict):
    """Host time of one step of each reduce-overhead variant, by what it is spent on,
    beside the GPU time of its kernels. A row whose build reused an earlier compile says so
    (its bars are that compile's graph again, not its own settings)."""
    cats = {name: host_categories(b) for name, b in res["host_breakdown"].items()}
    reused = reused_compile(res["fusion"]["rows"]) if "fusion" in res else []
    colors = [COLORS["compiled"], COLORS["eager"], COLORS["graph"], COLORS["wasted"]]
    fig, ax = new_figure(figsize=(8, 0.9 + 0.7 * len(cats)))
    for i, c in enumerate(cats.values()):
        left = 0.0
        for k, color in zip(BREAKDOWN_PARTS, colors):
            ax.barh(i, c[k], left=left, color=color, label=k if i == 0 else None, gid=k)
            left += c[k]
        ax.barh(
            i + 0.35,
            c["gpu_kernel_us"],
            height=0.2,
            color="black",
            label="GPU: its kernels" if i == 0 else None,
            gid="gpu",
        )
    names = [n + ("\n(reused an earlier compile:\nnot its settings)" if n in reused else "")
             for n in cats]  # fmt: skip
    ax.set_yticks(range(len(cats)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time per step under the profiler (µs)")
    ax.legend(fontsize=7, ncols=3)
    worst = max(cats, key=lambda n: cats[n]["host_us"])
    c = cats[worst]
    ax.set_title(
        f"{worst!r} spends {sig3(c['host_us'])} µs of host time per step\n"
        f"for {sig3(c['gpu_kernel_us'])} µs of kernels on the GPU",
        fontsize=10,
    )
    return label_source(fig, res)


# --- a picture of the mechanism ------------------------------------------------------------

COMPILE_PATHS = {  # lane → boxes (text, when it runs), in the order a step meets them
    'torch.compile(decode_one_token, mode="reduce-overhead")': (
        ("Dynamo + Inductor,\nwarm-up, record", "first calls, per shape"),
        ("Dynamo: check\nthe guards", "every step"),
        ("CUDAGraph Trees:\ncopy inputs not at\nstatic addresses", "every step"),
        ("replay the graph\n(Inductor's kernels)", "every step"),
    ),
    "GraphDecoder(model, batch, compile=True)": (
        ("Dynamo + Inductor,\ncapture", "capture(), per window"),
        ("pick the bucket,\ncopy the token in", "every step"),
        ("replay the bucket's graph\n(Inductor's kernels)", "every step"),
    ),
}


def compile_paths_figure():
    """What the host does for one decode step on each path to replayed, compiled kernels
    (solid boxes; the dashed ones run ahead): reduce-overhead's wrapper checks guards and
    copies inputs at every call; the course's decoder compiled and captured ahead, and
    then only picks a graph and replays it."""
    fig, ax = new_figure(figsize=(9.5, 3.4))
    colors = (COLORS["compiled"], COLORS["fused"])
    for row, ((lane, boxes), color) in enumerate(zip(COMPILE_PATHS.items(), colors)):
        y = 1.2 * (1 - row)
        ax.text(0, y + 0.4, lane, fontsize=9, family="monospace", va="bottom")
        for i, (text, when) in enumerate(boxes):
            x, ahead = i * 2.5, not when.startswith("every")
            ax.add_patch(
                Rectangle(
                    (x, y - 0.32), 2.1, 0.64, fc=color, alpha=0.12 if ahead else 0.35,
                    ec=color, ls="--" if ahead else "-", gid=f"{lane} | {text} | {when}",
                )
            )  # fmt: skip
            ax.text(x + 1.05, y, text, ha="center", va="center", fontsize=7.5)
            ax.text(x + 1.05, y - 0.36, when, ha="center", va="top", fontsize=7, style="italic")
            if i > 1:
                ax.annotate("", (x, y), (x - 0.4, y), arrowprops={"arrowstyle": "->", "lw": 1})
    ax.set(xlim=(-0.1, 10), ylim=(-0.85, 1.95))
    ax.axis("off")
    ax.set_title(
        "Every step, reduce-overhead checks guards and copies inputs, then replays;\n"
        "the course's decoder compiled and captured ahead, and only replays",
        fontsize=10,
    )
    return fig


def window_costs(window_times: dict) -> dict[int, dict]:
    """Per batch of a window_times record ({"<B>": {"windows", "step_us": [{median, ...}]}}):
    the smallest and the largest window, their median replayed step times, the extra µs and
    the ratio of the largest over the smallest."""
    out = {}
    for batch, rec in sorted(window_times.items(), key=lambda kv: int(kv[0])):
        w, us = rec["windows"], [s["median"] for s in rec["step_us"]]
        out[int(batch)] = {"small": w[0], "large": w[-1], "small_us": us[0],
                           "large_us": us[-1], "extra_us": us[-1] - us[0],
                           "ratio": us[-1] / us[0]}  # fmt: skip
    return out


def window_times_figure(res: dict):
    """Replayed step time of each bucket's graph at the same position (res["window_times"]),
    one line per batch, with the min–max over repeats: what a larger window costs."""
    wt = res["window_times"]
    fig, ax = new_figure(figsize=(7, 3.8))
    for (batch, rec), style in zip(sorted(wt.items(), key=lambda kv: int(kv[0])), "os^v"):
        med = np.array([s["median"] for s in rec["step_us"]])
        lo = med - np.array([s["min"] for s in rec["step_us"]])
        hi = np.array([s["max"] for s in rec["step_us"]]) - med
        ax.errorbar(rec["windows"], med, yerr=[lo, hi], marker=style, capsize=3,
                    color=COLORS["graph"], ls="-" if style == "o" else "--",
                    label=f"batch {batch}")  # fmt: skip
    windows = sorted({w for rec in wt.values() for w in rec["windows"]})
    ax.set_xscale("log", base=2)
    ax.set_xticks(windows, [str(w) for w in windows])
    ax.set(xlabel="window (keys attended)", ylabel="graph replay, step time (µs, median)")
    ax.set_ylim(0, None)
    ax.legend(fontsize=8)
    costs = window_costs(wt)
    first = next(iter(costs.values()))
    ax.set_title(
        f"A {first['large']}-key window over a {first['small']}-key one, same position: "
        + ", ".join(f"{sig3(c['ratio'])}× at batch {b}" for b, c in costs.items()),
        fontsize=10,
    )
    return label_source(fig, res)
