"""viz: every figure runs on the shipped recording (results/h200.json, the real schema), and
what it draws is its input (mask image == mask, slot bars == Engine.stats, bucket edges by
hand)."""

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import RESULTS_DIR, recorded_results, slot_stats, small_trace
from matplotlib.figure import Figure  # noqa: E402

from tinyllm import Engine, Transformer, get_config, graphs, kv_cache
from tinyllm.course import viz  # noqa: E402
from tinyllm.kv_cache import padded_causal_mask  # noqa: E402
from tinyllm.lab import results


@pytest.fixture(autouse=True)
def no_leaked_figures():
    yield
    assert plt.get_fignums() == [], "a viz function left a figure open in pyplot"


def test_window_mask_is_the_static_cache_mask():
    m = kv_cache.window_mask(5, 8, [0, 3, 5])
    assert m.dtype == torch.bool and m.shape == (3, 8)
    assert m.tolist()[1] == [False, False, False, True, True, True, False, False]
    # the decode mask is the last query row of the prefill mask with the same pads
    full = padded_causal_mask(0, 6, torch.tensor([0, 3, 5]))[:, 0, -1]
    assert torch.equal(m[:, :6], full) and not m[:, 6:].any()
    # (test_model.py checks that it is the static cache's decode mask at every step)


def test_slot_mask_is_the_slot_cache_mask():
    m = kv_cache.slot_mask([0, 2, 4], 6)
    assert m.int().tolist() == [[1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]]


def test_mask_figure_shows_the_mask():
    mask = kv_cache.window_mask(5, 8, [0, 3, 5])
    fig = viz.mask_figure(mask, pos=5, first_valid=[0, 3, 5])
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert np.array_equal(np.asarray(ax.images[0].get_array()), mask.numpy().astype(int))
    pads = ax.images[1].get_array()  # the pad overlay covers exactly the pad keys
    assert (~np.ma.getmaskarray(pads)).sum() == 3 + 5
    assert ax.get_title().startswith("Position 5:")


def test_bucket_windows_by_hand():
    w = graphs.bucket_windows((4, 8, 10), 10)
    assert w == [4, 4, 4, 4, 8, 8, 8, 8, 10, 10]
    assert graphs.bucket_windows(None, 300)[126:129] == [128, 128, 256]  # n = 127, 128, 129
    with pytest.raises(ValueError, match="max_len"):
        graphs.bucket_windows((4, 8), 10)


def test_wasted_share():
    max_len = 100
    mean_n = sum(range(1, max_len + 1)) / max_len
    assert graphs.wasted_share((max_len,), max_len) == pytest.approx(1 - mean_n / max_len)
    assert graphs.wasted_share(tuple(range(1, 11)), 10) == 0  # a bucket per length: no waste
    # (4, 8): windows 4,4,4,4,8,8,8,8 over n = 1..8 → (3+2+1+0+3+2+1+0) / 48
    assert graphs.wasted_share((4, 8), 8) == pytest.approx(12 / 48)


def test_bucket_figure_draws_the_windows():
    fig = viz.bucket_figure((4, 8, 10), 10)
    window_line = fig.axes[0].lines[0]
    assert list(window_line.get_ydata()) == graphs.bucket_windows((4, 8, 10), 10)
    assert "3 graphs" in fig.axes[0].get_title()


def engine_stats():
    """Engine.stats from a real run: a toy model, 3 slots, 5 requests of different lengths."""
    torch.manual_seed(0)
    engine = Engine(Transformer(get_config("toy")), n_slots=3, max_len=32, use_graph=False)
    for n in (3, 7, 2, 5, 4):
        engine.submit([1, 2, 3], max_new_tokens=n)
    engine.run()
    return engine.stats


@pytest.mark.parametrize("stats", [slot_stats(), engine_stats()], ids=["fixture", "engine"])
def test_slot_timeline_draws_the_occupancy(stats):
    n_slots = len(stats[0]["slots"])
    fig = viz.slot_timeline_figure(stats, n_slots)
    drawn = [[None] * n_slots for _ in stats]
    for bar in fig.axes[0].patches:
        rid = int(bar.get_gid().split()[1])
        slot = round(bar.get_y() + bar.get_height() / 2)
        for step in range(round(bar.get_x() + 0.5), round(bar.get_x() + 0.5 + bar.get_width())):
            assert drawn[step][slot] is None
            drawn[step][slot] = rid
    assert drawn == [st["slots"] for st in stats]
    assert list(fig.axes[1].lines[0].get_ydata()) == [st["n_active"] for st in stats]
    windows = fig.axes[2]  # the window axis, twin of the active-slots one
    assert list(windows.get_yticks()) == sorted({st["window"] for st in stats})


def test_slot_segments_split_a_slot_between_requests():
    assert viz.slot_segments(slot_stats(), 3) == [  # (slot, request, first step, n steps)
        (0, 0, 0, 2),
        (1, 1, 0, 3),
        (2, 2, 0, 2),
        (0, 3, 2, 2),
    ]


def test_gpu_idle_share():
    events = [
        {"start_us": s, "dur_us": d, "kind": k}
        for s, d, k in ((0, 2, "gpu"), (1, 2, "gpu"), (7, 3, "gpu"), (3, 9, "cpu"))
    ]
    assert viz.gpu_idle_share(events) == pytest.approx(4 / 10)  # busy 0-3 and 7-10


@pytest.mark.parametrize(
    "draw",
    [
        lambda r, t: viz.step_time_figure(r),
        lambda r, t: viz.cpu_gpu_figure(r, 64),
        lambda r, t: viz.timeline_figure(t, 1, steps=2),
        lambda r, t: viz.timeline_figure(t, 64, methods=("graph",)),
        lambda r, t: viz.capture_figure(r),
        lambda r, t: viz.engine_figure(r),
        lambda r, t: viz.logit_diff_figure(
            range(len(r["eager_vs_static"]["max_logit_diff_per_step"])),
            r["eager_vs_static"]["max_logit_diff_per_step"],
            r["eager_vs_static"]["flips"],
        ),
        lambda r, t: viz.logit_diff_figure([0, 1], [0.0, 0.0]),
        lambda r, t: viz.loss_figure(
            json.loads((RESULTS_DIR / "train" / "run_a.json").read_text())["history"]
        ),
    ],
)
def test_every_figure_runs_on_the_schema(draw):
    fig = draw(recorded_results(), small_trace())
    assert isinstance(fig, Figure)
    fig.canvas.draw()  # layout and text render without error
    assert fig.axes[0].get_title() or fig.get_suptitle()


def drawn_spans(ax) -> list[tuple[float, float]]:
    """(start, width) of every bar of an axes' broken_barh collections."""
    return [
        (p.get_extents().x0, p.get_extents().width) for c in ax.collections for p in c.get_paths()
    ]


@pytest.mark.parametrize("batch, steps", [(1, 1), (64, 2)])
def test_timeline_draws_every_event_at_least_min_width(batch, steps):
    trace = json.loads((RESULTS_DIR / "traces" / "h200.json").read_text())  # 1 µs kernels
    fig = viz.timeline_figure(trace, batch, steps=steps)
    runs = trace["batch"][str(batch)]
    span = fig.axes[-1].get_xlim()[1] / 1.01
    for ax, m in zip(fig.axes, ("eager", "graph")):
        keep = sorted({e["step"] for e in runs[m]})[:steps]
        events = [e for e in runs[m] if e["step"] in keep]
        spans = drawn_spans(ax)
        assert len(spans) == len(events)  # one bar per kernel and per launch
        assert min(w for _, w in spans) >= viz.MIN_BAR_SHARE * span * (1 - 1e-9)
        t0 = min(e["start_us"] for e in events)
        starts = sorted(e["start_us"] - t0 for e in events)
        assert sorted(x for x, _ in spans) == pytest.approx(starts)  # starts are exact
    assert "widened" in viz.footnote_text(fig)


def test_timeline_kernels_only_draws_the_kernels_span():
    """kernels_only draws one replay's kernels alone: no token copy, no CPU lane, and an axis
    from the first kernel's start to the last one's end, as its title says."""
    trace = json.loads((RESULTS_DIR / "traces" / "h200.json").read_text())
    events = [e for e in trace["batch"]["1"]["graph"] if e["step"] == 0]
    kernels = [e for e in events if e["kind"] == "gpu" and not e["name"].startswith("Memcpy")]
    assert len(kernels) < len([e for e in events if e["kind"] == "gpu"])  # a copy is there
    fig = viz.timeline_figure(trace, 1, methods=("graph",), kernels_only=True)
    ax = fig.axes[0]
    t0 = min(e["start_us"] for e in kernels)
    end = max(e["start_us"] + e["dur_us"] for e in kernels)
    assert ax.get_xlim() == pytest.approx((0, end - t0))
    spans = drawn_spans(ax)
    assert len(spans) == len(kernels)  # one bar per kernel, nothing else
    assert sorted(x for x, _ in spans) == pytest.approx(sorted(e["start_us"] - t0 for e in kernels))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GPU kernels"]
    assert "the kernels alone" in fig.get_suptitle()
    assert f"{viz.gpu_idle_share(events):.0%}" in fig.get_suptitle()
    default = viz.timeline_figure(trace, 1, methods=("graph",))  # the copy and the CPU lane
    assert len(drawn_spans(default.axes[0])) == len(events)


RECORDED_FIGURES = {
    "step_time": lambda r, t: viz.step_time_figure(r),
    "cpu_gpu": lambda r, t: viz.cpu_gpu_figure(r, 1),
    "timeline": lambda r, t: viz.timeline_figure(t, 1),
    "capture": lambda r, t: viz.capture_figure(r),
    "engine": lambda r, t: viz.engine_figure(r),
    "kernels": lambda r, t: viz.kernels_figure(t, 1),
    "floor": lambda r, t: viz.floor_figure(r, 1),
    "logit_diff": lambda r, t: viz.logit_diff_figure(
        range(r["eager_vs_static"]["steps"]),
        r["eager_vs_static"]["max_logit_diff_per_step"],
        r["eager_vs_static"]["flips"],
        recording=r,
    ),
}


@pytest.mark.parametrize("name", RECORDED_FIGURES)
def test_recorded_figures_carry_their_provenance(name, recorded):
    draw = RECORDED_FIGURES[name]
    fig = draw(recorded, small_trace())
    label = results.provenance_label(recorded)
    assert viz.footnote_text(fig).splitlines()[0] == label
    fig.draw_without_rendering()  # lay it out (a closed figure's canvas draws nothing)
    (note,) = [t for t in fig.texts if t.get_gid() == "footnote"]
    top = note.get_window_extent().y1
    # the footnote sits below every axes and its labels
    assert all(ax.get_tightbbox().y0 >= top - 1 for ax in fig.axes)
    del recorded["provenance"]
    trace = small_trace()
    del trace["provenance"]
    assert "recorded on" not in viz.footnote_text(draw(recorded, trace))  # nothing invented


SHIPPED_FIGURES = {  # every figure drawn from a recording, on the shipped ones
    "step_time_figure": lambda r, d, t: viz.step_time_figure(r),
    "cpu_gpu_figure": lambda r, d, t: viz.cpu_gpu_figure(r, 1),
    "timeline_figure": lambda r, d, t: viz.timeline_figure(t, 1),
    "capture_figure": lambda r, d, t: viz.capture_figure(r),
    "kernels_figure": lambda r, d, t: viz.kernels_figure(t, 1),
    "floor_figure": lambda r, d, t: viz.floor_figure(r, 1),
    "engine_figure": lambda r, d, t: viz.engine_figure(r),
    "logit_diff_figure": lambda r, d, t: viz.logit_diff_figure(
        range(r["eager_vs_static"]["steps"]),
        r["eager_vs_static"]["max_logit_diff_per_step"],
        r["eager_vs_static"]["flips"],
        recording=r,
    ),
    "peers_figure": lambda r, d, t: viz.peers_figure(r),
    "cost_model_figure": lambda r, d, t: viz.cost_model_figure(r, d),
    "diet_figure": lambda r, d, t: viz.diet_figure(d),
    "sweep_figure": lambda r, d, t: viz.sweep_figure(r),
    "breakdown_figure": lambda r, d, t: viz.breakdown_figure(r),
    "window_times_figure": lambda r, d, t: viz.window_times_figure(r),
    "launches_figure": lambda r, d, t: viz.launches_figure(viz.launch_costs(r)),
    "pool_figure": lambda r, d, t: viz.pool_figure(r),
    "paged_sweep_figure": lambda r, d, t: viz.paged_sweep_figure(results.load_paged()),
    "node_floor_figure": lambda r, d, t: viz.node_floor_figure(results.load_floor()),
    "attention_figure": lambda r, d, t: viz.attention_figure(results.load_paged()),
    "splits_figure": lambda r, d, t: viz.splits_figure(results.load_splits()),
    "tensor_cores_figure": lambda r, d, t: viz.tensor_cores_figure(results.load_dot()),
    "short_rows_figure": lambda r, d, t: viz.short_rows_figure(results.load_short_rows()),
    "sections_figure": lambda r, d, t: viz.sections_figure(
        viz.recorded_groups(results.load_engine()), results.load_engine()
    ),
    "overlap_timeline_figure": lambda r, d, t: viz.overlap_timeline_figure(results.load_engine()),
    "capture_policy_figure": lambda r, d, t: viz.capture_policy_figure(
        results.load_capture_policy()
    ),
}
NOT_FROM_A_RECORDING = {"mask_figure", "bucket_figure", "bucket_tradeoff_figure",
                        "buckets_figure", "static_cache_figure", "slots_figure",
                        "slot_timeline_figure", "compile_paths_figure", "loss_figure",
                        "pages_figure", "late_read_figure"}  # fmt: skip


def test_every_figure_of_a_recording_is_in_the_table():
    figures = {n for n in viz.__all__ if n.endswith("_figure") and n != "new_figure"}
    assert figures == SHIPPED_FIGURES.keys() | NOT_FROM_A_RECORDING


@pytest.mark.parametrize("name", SHIPPED_FIGURES)
def test_no_footnote_of_a_shipped_recording_leaves_a_question_mark(name, recorded):
    """Each footnote names the GPU, torch, date and commit(s) the recording holds."""
    fig = SHIPPED_FIGURES[name](recorded, results.load_diet(), results.load_trace(recorded))
    note = viz.footnote_text(fig)
    assert "?" not in note, note


def test_the_diet_footnote_names_each_stages_commit():
    diet = results.load_diet()
    note = viz.footnote_text(viz.diet_figure(diet))
    for stage in diet["stages"]:
        assert f"{stage['stage']} {stage['commit'][:7]}" in note


def test_titles_state_what_the_data_says():
    res = recorded_results()
    assert "launch-bound" in viz.step_time_figure(res).axes[0].get_title()
    res["gpu_kernel_time"]["eager_us"] = [10**6 for _ in res["gpu_kernel_time"]["batch"]]
    assert "launch-bound" not in viz.step_time_figure(res).axes[0].get_title()
    res["gpu_kernel_time"]["eager_us"][-1] = 0
    title = viz.step_time_figure(res).axes[0].get_title()
    assert title == f"Eager decode is launch-bound at batch {res['step_time']['batch'][-1]}"
    assert viz.timeline_figure(small_trace(), 1).get_suptitle().startswith("Graph replay removes")
    with pytest.raises(ValueError, match="recorded batches"):
        viz.cpu_gpu_figure(res, 3)


def test_results_are_the_shipped_recording_and_a_learners_is_found_apart(tmp_path, monkeypatch):
    """Checked cells print the shipped recording whatever a learner recorded; own_results()
    finds the learner's newest one for the cells nbval does not compare."""
    monkeypatch.setenv("TINYLLM_RESULTS", str(tmp_path))
    monkeypatch.chdir(tmp_path)

    def recording(date):
        res = recorded_results()
        res["provenance"].update(date=date, commit="abc1234def5678")
        return json.dumps(res)

    (tmp_path / "h200.json").write_text(recording("2026-11-30"))
    assert results.results_dir() == tmp_path
    assert results.load_results()["file"] == "h200.json" and results.own_results() is None
    for name, date in (("rtx4090", "2026-12-01"), ("a100", "2026-12-05")):
        (tmp_path / f"{name}.json").write_text(recording(date))
    (tmp_path / "h200_diet.json").write_text(json.dumps({"provenance": {"date": "2027-01-01"}}))
    assert results.load_results()["file"] == "h200.json"  # still the shipped one
    res = results.own_results()
    assert res["file"] == "a100.json"  # the newest bench recording, not the diet file
    assert results.load_results("rtx4090")["provenance"]["date"] == "2026-12-01"
    p = res["provenance"]
    assert results.provenance_label(res) == (
        f"recorded on {p['gpu']}, torch {p['torch']}, 2026-12-05, commit abc1234"
    )
    assert results.load_trace(res) is None
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a100.json").write_text(json.dumps(small_trace()))
    assert results.load_trace(res) == small_trace()


def test_results_outside_a_checkout_say_where_to_look(tmp_path, monkeypatch):
    """As in a non-editable install: no results/ next to the package, none here."""
    monkeypatch.delenv("TINYLLM_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(results, "__file__", str(tmp_path / "site" / "tinyllm" / "lab" / "r.py"))
    with pytest.raises(ValueError, match="set TINYLLM_RESULTS"):
        results.load_results()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "h200.json").write_text(json.dumps(recorded_results()))
    assert results.load_results()["file"] == "h200.json"  # found in the current folder


def test_capture_cost_sums_only_measured_windows(recorded):
    cap = recorded["capture"]
    assert cap["windows"] == [128, 256, 512, 1024]
    cost = results.capture_cost(recorded, (128, 192, 1024))
    assert cost == {
        "measured": [128, 1024],
        "not_measured": [192],
        "capture_s": pytest.approx(cap["capture_s"][0] + cap["capture_s"][3]),
        "pool_bytes": cap["pool_bytes"][0] + cap["pool_bytes"][3],
    }


def test_the_small_trace_has_the_recorded_schema():
    real = json.loads((RESULTS_DIR / "traces" / "h200.json").read_text())
    assert set(real) == set(small_trace())
    event = real["batch"]["1"]["eager"][0]
    assert all(set(e) == set(event) for e in small_trace()["batch"]["1"]["eager"])
    assert set(real["batch"]["1"]) >= {"eager", "graph"}


# --- notebooks 01 and 03 -----------------------------------------------------------------


def test_kernels_figure_counts_the_traced_step():
    trace = small_trace()
    fig = viz.kernels_figure(trace, 1, "eager")
    (ax,) = fig.axes
    assert sum(p.get_width() for p in ax.patches) == 6  # fake_trace: 6 kernels per step
    assert "launches 6 kernels;" in ax.get_title() and "per layer" not in ax.get_title()
    with pytest.raises(ValueError, match="batch 3"):
        viz.kernels_figure(trace, 3)


def test_floor_figure_draws_the_recorded_times():
    res = recorded_results()
    t = viz.floor_times(res, 1)
    assert t == {
        "floor": res["bandwidth"]["floor_us"],
        "kernels": res["gpu_kernel_time"]["eager_us"][0],
        "graph": res["step_time"]["graph_us"][0],
        "eager": res["step_time"]["eager_us"][0],
    }
    (ax,) = viz.floor_figure(res, 1).axes
    assert [p.get_height() for p in ax.patches] == list(t.values())
    assert f"{viz.sig3(t['eager'] / t['floor'])}× the bandwidth floor" in ax.get_title()
    with pytest.raises(ValueError, match="batch 3 was not recorded"):
        viz.floor_times(res, 3)


def test_bucket_tradeoff():
    rows = viz.shapes.bucket_tradeoff(1024, 128, growths=(4, 2, 1.5))
    assert [r["growth"] for r in rows] == [None, 4, 2, 1.5]
    assert rows[0]["buckets"] == (1024,) and rows[2]["buckets"] == graphs.default_buckets(
        1024, 128, 2
    )
    assert [r["n_graphs"] for r in rows] == [len(r["buckets"]) for r in rows] == [1, 3, 4, 7]
    shares = [r["wasted_share"] for r in rows]
    assert shares == sorted(shares, reverse=True)  # more graphs, less waste
    assert shares[0] == graphs.wasted_share((1024,), 1024)
    (ax,) = viz.bucket_tradeoff_figure(1024, 128, growths=(4, 2, 1.5)).axes
    x, y = ax.lines[0].get_data()
    assert list(x) == [1, 3, 4, 7] and list(y) == [100 * s for s in shares]


def window_times(us_1, us_8) -> dict:
    """res["window_times"] in the recording's schema, with the given medians."""
    rec = lambda us: {  # noqa: E731
        "windows": [128, 256, 512, 1024],
        "step_us": [{"median": u, "min": u - 1, "max": u + 2, "n": 5} for u in us],
    }
    return {"8": rec(us_8), "1": rec(us_1)}  # keys out of order, as JSON may hold them


def test_window_costs_and_figure():
    wt = window_times([100, 110, 130, 200], [150, 170, 220, 450])
    costs = viz.window_costs(wt)
    assert list(costs) == [1, 8]
    assert costs[1] == {"small": 128, "large": 1024, "small_us": 100, "large_us": 200,
                        "extra_us": 100, "ratio": 2.0}  # fmt: skip
    assert costs[8]["ratio"] == 3.0
    fig = viz.window_times_figure({"window_times": wt})
    fig.canvas.draw()
    title = fig.axes[0].get_title()
    assert "1024-key window over a 128-key one" in title
    assert "2× at batch 1" in title and "3× at batch 8" in title
    drawn = [list(c.lines[0].get_ydata()) for c in fig.axes[0].containers]
    assert drawn == [[100, 110, 130, 200], [150, 170, 220, 450]]
    assert [c.get_label() for c in fig.axes[0].containers] == ["batch 1", "batch 8"]
    faster = viz.window_times_figure({"window_times": window_times([100] * 4, [90, 80, 70, 60])})
    assert "1× at batch 1" in faster.axes[0].get_title()  # the title says what the data says
    assert "0.667× at batch 8" in faster.axes[0].get_title()


def test_step_time_figure_draws_both_sides_its_title_compares():
    """The title compares eager decode's CPU issue time with its GPU kernel time: both are
    drawn, from the recording."""
    res = recorded_results()
    ax = viz.step_time_figure(res).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    issue = lines["eager: CPU issue time (measured apart)"]
    kernels = lines["eager: GPU kernels, summed"]
    assert list(issue.get_ydata()) == res["cpu_time"]["eager_us"]
    assert list(kernels.get_ydata()) == res["gpu_kernel_time"]["eager_us"]


def test_breakdown_figure_labels_a_row_that_reused_a_compile(recorded):
    """A gpt-fast row built in under a second ran an earlier build's graph: its label says
    so, as the peers figure's does, and the other rows' labels do not."""
    from tinyllm.lab.peers import reused_compile

    reused = set(reused_compile(recorded["fusion"]["rows"]))
    fig = viz.breakdown_figure(recorded)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == len(recorded["host_breakdown"])
    for name, label in zip(recorded["host_breakdown"], labels):
        assert label.startswith(name)
        assert ("reused an earlier compile" in label) == (name in reused), label
