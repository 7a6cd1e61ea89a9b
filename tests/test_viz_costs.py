"""viz.costs: what each figure of notebook 07 draws is its input (bars are the recorded
medians, points the recorded steps, lines the fit and the sweep), and each title says what
the data says, on a made-up recording in the bench's schema (conftest.peer_results)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import peer_diet, peer_results
from matplotlib.collections import PathCollection  # noqa: E402

from tinyllm.course import viz  # noqa: E402
from tinyllm.course.viz import costs  # noqa: E402
from tinyllm.lab.peers import host_categories


@pytest.fixture(autouse=True)
def no_leaked_figures():
    yield
    assert plt.get_fignums() == [], "a viz function left a figure open in pyplot"


@pytest.fixture
def res():
    return peer_results()


def median(row):
    return row["step_us"]["median"]


# --- host_categories ---------------------------------------------------------------------------


def test_host_categories_split_the_host_time(res):
    c = host_categories(res["host_breakdown"]["gpt-fast"])
    assert c["guards"] == 25.0
    assert c["input copies"] == 400.0  # CUDAGraph Trees' _foreach_copy_ alone
    assert c["graph launch"] == 80.0
    assert c["other"] == 800.0 - 25.0 - 400.0 - 80.0  # the step's own aten::copy_ is here
    assert c["host_us"] == 800.0 and c["gpu_kernel_us"] == 110.0


def test_a_step_without_a_graph_has_no_input_copies_or_launch(res):
    c = host_categories(res["host_breakdown"]["reduce-overhead, first try"])
    assert c["input copies"] == 0.0 and c["graph launch"] == 0.0
    assert c["other"] == 1000.0 - 40.0


def test_host_categories_never_go_negative():
    b = {"host_step_us": 10.0, "gpu_kernel_us": 1.0, "host_events_us": {"cudaGraphLaunch": 12.0}}
    assert host_categories(b)["other"] == 0.0


# --- peers_figure --------------------------------------------------------------------------------


def test_peers_figure_draws_each_rows_median_and_spread(res):
    rows = res["fusion"]["rows"]
    (ax,) = viz.peers_figure(res).axes
    assert [b.get_width() for b in ax.patches] == [median(r) for r in rows]
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["name"] for r in rows]
    (err,) = [c for c in ax.collections if c.get_segments()]  # the min–max bars
    spans = [tuple(sorted((s[0][0], s[1][0]))) for s in err.get_segments()]
    assert spans == [(r["step_us"]["min"], r["step_us"]["max"]) for r in rows]


def test_peers_figure_labels_and_title(res):
    (ax,) = viz.peers_figure(res).axes
    labels = [t.get_text() for t in ax.texts]
    assert labels[4] == "120 µs · 53 kernels · set-up 9 s"
    assert labels[6].endswith("· no CUDA graph")  # reduce-overhead skipped its graph
    assert sum("no CUDA graph" in t for t in labels) == 1
    title = ax.get_title()
    assert "120 µs per step" in title
    assert f"{viz.sig3(res['headline']['best_over_gptfast'])}× the step of gpt-fast" in title
    assert res["headline"]["best_over_gptfast"] == 0.75  # 120 / 160, forward only


# --- cost_model_figure ---------------------------------------------------------------------------


def points(ax, prefix):
    return {
        c.get_gid().split(" ", 1)[1]: tuple(c.get_offsets()[0])
        for c in ax.collections
        if isinstance(c, PathCollection) and (c.get_gid() or "").startswith(prefix)
    }


def test_cost_model_figure_fills_the_points_in_the_fit(res):
    (ax,) = viz.cost_model_figure(res, peer_diet()).axes
    inside, outside = points(ax, "fit "), points(ax, "out ")
    fitted = {p["name"] for p in res["cost_model"]["points"]}
    rows = {r["name"]: (r["kernels"], median(r)) for r in res["fusion"]["rows"]}
    assert inside == {n: xy for n, xy in rows.items() if n in fitted}
    assert outside == {n: xy for n, xy in rows.items() if n not in fitted}
    assert "reduce-overhead, first try" in outside  # it skipped its graph: not replayed
    assert {"eager", "static", "fused kernels, no graph"} <= outside.keys()
    diet = points(ax, "diet ")
    assert diet == {s["stage"]: (s["batch"]["1"]["graph"]["kernels"],
                                 s["batch"]["1"]["graph"]["step_us"]["median"])
                    for s in peer_diet()["stages"]}  # fmt: skip


def test_cost_model_figure_draws_the_fit_and_the_floor(res):
    (ax,) = viz.cost_model_figure(res, peer_diet()).axes
    fit = res["cost_model"]["fit"]
    line, floor = ax.lines
    x, y = line.get_data()
    assert np.allclose(y, fit["a_us"] + fit["b_us_per_kernel"] * np.asarray(x))
    assert list(floor.get_ydata()) == [1.5, 1.5]
    assert ax.get_title().startswith(
        f"A replayed step costs about {viz.sig3(fit['a_us'])} µs + "
        f"{viz.sig3(fit['b_us_per_kernel'])} µs per kernel"
    )


def drawn_at(ax, line, x):
    """Where `line` is drawn at data x, read as the eye reads it: straight segments between
    its points in display space (a log axis bends data space), back in data units. The
    figure must have been drawn (draw_without_rendering) since it last changed: its axes'
    limits, hence its transform."""
    xy = ax.transData.transform(np.column_stack(line.get_data()))
    at = ax.transData.transform((x, 1.0))[0]
    return ax.transData.inverted().transform((at, np.interp(at, xy[:, 0], xy[:, 1])))[1]


@pytest.mark.parametrize("recording", ["made up", "shipped"])
def test_cost_model_line_passes_through_the_fit_at_every_points_kernels(recording, res):
    """A point with no residual lies on the drawn line, on the log axis too."""
    from conftest import recorded_results

    from tinyllm.lab.results import load_diet

    res, diet = (res, peer_diet()) if recording == "made up" else (recorded_results(), load_diet())
    (ax,) = viz.cost_model_figure(res, diet).axes
    assert ax.get_yscale() == "log"
    fit = res["cost_model"]["fit"]
    line = ax.lines[0]
    ax.figure.draw_without_rendering()  # once: reading where the line is changes nothing
    for p in res["cost_model"]["points"]:
        k = p["kernels"]
        want = fit["a_us"] + fit["b_us_per_kernel"] * k
        assert drawn_at(ax, line, k) == pytest.approx(want, rel=1e-3), p["name"]


def test_cost_model_title_says_when_there_is_no_cost_per_kernel():
    fit = {"a_us": 100.0, "b_us_per_kernel": -2.0, "residuals_us": {"x": 3.0}}
    title = costs.cost_model_title(fit)
    assert "does not get slower" in title and "100 µs − 2 µs × kernels" in title
    fit["b_us_per_kernel"] = 0.5
    title = costs.cost_model_title(fit)
    assert "costs about 100 µs + 0.5 µs per kernel" in title and "up to 3 µs" in title


def test_cost_model_figure_without_a_diet(res):
    (ax,) = viz.cost_model_figure(res).axes
    assert points(ax, "diet ") == {}


# --- diet_figure ---------------------------------------------------------------------------------


def test_diet_figure_draws_kernels_and_step_times():
    diet = peer_diet()
    fig = viz.diet_figure(diet)
    kernels_ax, time_ax = fig.axes
    graph = [s["batch"]["1"]["graph"] for s in diet["stages"]]
    assert [p.get_height() for p in kernels_ax.patches] == [g["kernels"] for g in graph]
    assert [p.get_height() for p in time_ax.patches] == [g["step_us"]["median"] for g in graph]
    assert "273 → 85 kernels" in fig.get_suptitle()


# --- sweep ---------------------------------------------------------------------------------------


def test_sweep_wins_by_hand(res):
    # fused 120, 121, 170, 171 µs against gpt-fast's 160: faster in the first two bins
    assert viz.sweep_wins(res) == {"positions": [32, 48], "share": 0.5, "max_len": 1024}


def test_sweep_figure_draws_the_sweep(res):
    (ax,) = viz.sweep_figure(res).axes
    sw = res["position_sweep"]
    graph, fused, gptfast = ax.lines[:3]
    for line, key in ((graph, "graph_us"), (fused, "fused_us"), (gptfast, "gpt-fast_us")):
        assert list(line.get_xdata()) == sw["positions"]
        assert list(line.get_ydata()) == sw[key]
    edges = [line.get_xdata()[0] for line in ax.lines[3:]]
    assert edges == [128, 256, 512]  # every bucket edge but max_len
    assert "1024-position cache" in ax.get_title() and "at 50% of the positions" in ax.get_title()


def test_sweep_figure_title_when_gptfast_always_wins(res):
    res["position_sweep"]["fused_us"] = [200.0] * 4
    (ax,) = viz.sweep_figure(res).axes
    assert ax.get_title() == (
        "gpt-fast in its loop, over a 1024-position cache, was faster at every position measured"
    )


# --- breakdown_figure ----------------------------------------------------------------------------


def test_breakdown_figure_stacks_the_host_categories(res):
    (ax,) = viz.breakdown_figure(res).axes
    cats = [host_categories(b) for b in res["host_breakdown"].values()]
    for part in costs.BREAKDOWN_PARTS:
        bars = [p for p in ax.patches if p.get_gid() == part]
        assert [b.get_width() for b in bars] == [c[part] for c in cats]
    gpu = [p.get_width() for p in ax.patches if p.get_gid() == "gpu"]
    assert gpu == [c["gpu_kernel_us"] for c in cats]
    ends = {}
    for p in ax.patches:
        if p.get_gid() in costs.BREAKDOWN_PARTS:
            row = round(p.get_y() + p.get_height() / 2)
            ends[row] = max(ends.get(row, 0.0), p.get_x() + p.get_width())
    assert [ends[i] for i in range(len(cats))] == [c["host_us"] for c in cats]
    assert ax.get_title().startswith("'reduce-overhead, first try' spends 1000 µs of host time")
    assert "for 100 µs of kernels on the GPU" in ax.get_title()


# --- the picture of the two paths ----------------------------------------------------------------


def test_compile_paths_figure_draws_each_lane_in_order():
    (ax,) = viz.compile_paths_figure().axes
    boxes = [p for p in ax.patches if p.get_gid()]
    for lane, expected in costs.COMPILE_PATHS.items():
        drawn = sorted((b for b in boxes if b.get_gid().startswith(lane)), key=lambda b: b.get_x())
        assert [b.get_gid().split(" | ", 1)[1] for b in drawn] == [
            f"{text} | {when}" for text, when in expected
        ]
        for box, (_, when) in zip(drawn, expected):
            assert (box.get_linestyle() == "-") == when.startswith("every")  # ahead: dashed
    per_step = {lane: sum(w.startswith("every") for _, w in b) for lane, b in
                costs.COMPILE_PATHS.items()}  # fmt: skip
    assert per_step == {'torch.compile(decode_one_token, mode="reduce-overhead")': 3,
                        "GraphDecoder(model, batch, compile=True)": 2}  # fmt: skip


@pytest.mark.parametrize(
    "draw",
    [
        lambda r: viz.peers_figure(r),
        lambda r: viz.cost_model_figure(r, peer_diet()),
        lambda r: viz.diet_figure(peer_diet(), "8"),
        lambda r: viz.sweep_figure(r),
        lambda r: viz.breakdown_figure(r),
        lambda r: viz.compile_paths_figure(),
    ],
)
def test_every_cost_figure_renders(draw, res):
    fig = draw(res)
    fig.canvas.draw()
    assert fig.axes[0].get_title() or fig.get_suptitle()


def test_the_recorded_cost_model_is_the_fit_of_its_own_rows():
    """The recording's fit is what peers.cost_model makes of the recording's rows and diet:
    a changed row, stage or fit rule fails here."""
    from conftest import recorded_results

    from tinyllm.lab import peers
    from tinyllm.lab.results import load_diet

    rec = recorded_results()
    fitted = peers.cost_model(rec["fusion"]["rows"], load_diet())
    assert fitted["points"] == rec["cost_model"]["points"]
    assert fitted["fit"] == rec["cost_model"]["fit"]
    assert not any(p["name"].startswith("gpt-fast") for p in fitted["points"])


def test_the_recorded_headline_is_the_rule_of_its_own_rows():
    from conftest import recorded_results

    from tinyllm.lab import bench

    rec = recorded_results()
    assert bench.headline(rec) == rec["headline"]


def test_a_gptfast_row_built_in_under_a_second_reused_a_compile():
    from tinyllm.lab import peers

    def row(name, setup_s, us):
        return {"name": name, "setup_s": setup_s, "step_us": {"median": us}}

    rows = [row("graph", 0.04, 170), row("gpt-fast", 30.0, 300),
            row("gpt-fast, static tables", 0.04, 200), row("gpt-fast, x=1", 0.03, 100)]  # fmt: skip
    assert peers.reused_compile(rows) == ["gpt-fast, static tables", "gpt-fast, x=1"]
    assert peers.strongest_gptfast(rows)["name"] == "gpt-fast"  # not the faster reused row


def test_the_peers_figure_says_which_rows_reused_a_compile(res):
    (ax,) = viz.peers_figure(res).axes
    assert not [t for t in ax.texts if "reused" in t.get_text()]
    gpt = next(r for r in res["fusion"]["rows"] if r["name"].startswith("gpt-fast"))
    gpt["setup_s"] = 0.03
    (ax,) = viz.peers_figure(res).axes
    (label,) = [t.get_text() for t in ax.texts if "reused" in t.get_text()]
    assert "set-up 0.03 s" in label
