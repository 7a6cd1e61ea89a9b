"""widgets: each explorer builds, and moving a control recomputes what it shows."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import recorded_results, slot_stats, small_trace

from tinyllm import graphs, kv_cache
from tinyllm.course import widgets  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_figures():
    yield
    assert plt.get_fignums() == []


def control(w, name):
    return next(c for c in w.kwargs_widgets if c._kwarg == name)


def test_mask_explorer_follows_position_window_and_pads():
    w = widgets.mask_explorer(batch_pads=(0, 3, 5), window=16)
    assert torch.equal(w.result, kv_cache.window_mask(9, 16, [0, 3, 5]))
    control(w, "pos").value = 20  # past the first bucket: the next one is picked
    assert torch.equal(w.result, kv_cache.window_mask(20, 32, [0, 3, 5]))
    control(w, "pad_1").value = 7
    assert torch.equal(w.result, kv_cache.window_mask(20, 32, [0, 7, 5]))
    control(w, "bucket").value = 16  # too small for position 20: explained, not drawn
    assert w.result is None


def test_bucket_explorer_sums_only_recorded_windows(capsys):
    res = recorded_results()
    cap = dict(
        zip(
            res["capture"]["windows"],
            zip(res["capture"]["capture_s"], res["capture"]["pool_bytes"]),
        )
    )
    w = widgets.bucket_explorer(res)
    assert w.result["buckets"] == (128, 256, 512, 1024)
    assert w.result["capture"]["not_measured"] == []
    control(w, "growth").value = 3.0
    assert w.result["buckets"] == (128, 384, 1024) and w.result["n_graphs"] == 3
    assert w.result["capture"] == {
        "measured": [128, 1024],
        "not_measured": [384],
        "capture_s": pytest.approx(cap[128][0] + cap[1024][0]),
        "pool_bytes": cap[128][1] + cap[1024][1],
    }
    assert "[384] were not measured" in capsys.readouterr().out
    control(w, "max_len").value = 512
    assert w.result["wasted_share"] == pytest.approx(graphs.wasted_share((128, 384, 512), 512))


def test_timing_explorer_offers_recorded_batches_only():
    w = widgets.timing_explorer(recorded_results(), small_trace())
    assert list(control(w, "batch").options) == [1, 64]
    assert "Batch 1:" in w.result[0].axes[0].get_title()
    control(w, "batch").value = 64
    assert "Batch 64:" in w.result[0].axes[0].get_title()
    control(w, "rows").value = "graph"
    assert len(w.result[1].axes) == 1


def test_slot_timeline_explorer_draws_the_chosen_steps():
    w = widgets.slot_timeline_explorer(slot_stats(), 3)
    assert "over 4 decode steps" in w.result.axes[0].get_title()
    control(w, "steps").value = (2, 3)
    assert "over 2 decode steps" in w.result.axes[0].get_title()


def test_pages_explorer_follows_the_host_moves(capsys):
    w = widgets.pages_explorer(prompt_lens=(5, 9, 3))
    assert w.result["lens"] == [5, 9, 3] and [len(t) for t in w.result["tables"]] == [2, 3, 1]
    control(w, "steps").value = 4
    assert w.result["lens"] == [9, 13, 7] and [len(t) for t in w.result["tables"]] == [3, 4, 2]
    control(w, "release").value = 0
    assert w.result["tables"][0] == [] and not w.result["active"][0]
    control(w, "compact").value = True
    assert w.result["active"] == [True, True, False] and w.result["lens"] == [7, 13, 0]
    control(w, "block_size").value = 8
    assert [len(t) for t in w.result["tables"]] == [1, 2, 0]
    control(w, "len_1").value = 16
    control(w, "steps").value = 16  # the sliders' ends: a row at max_len, never past it
    assert w.result["lens"][1] == 32 and len(w.result["tables"][1]) == 4
    assert "free list" in capsys.readouterr().out


def test_engine_explorer_offers_the_recorded_runs_only(capsys):
    from tinyllm.lab.results import load_engine

    rec = load_engine()
    detail = rec["engine_paged"]["detail"]
    w = widgets.engine_explorer(rec)
    assert sorted(control(w, "n_rows").options) == sorted(detail)
    assert control(w, "n_rows").description == "rows"
    assert list(control(w, "variant").options)[0] == "slots"
    # it opens on the engine with every change, at the most rows: a profiled run
    assert w.result["gpu_busy_share"] == detail["32"]["paged_overlap"]["gpu_busy_share"]
    assert "paged_overlap, 32 rows" in capsys.readouterr().out
    control(w, "variant").value = "slots"
    control(w, "n_rows").value = "8"
    assert w.result["tok_s"] == detail["8"]["slots"]["tok_s"]
    assert "not profiled in this recording" in capsys.readouterr().out


def test_late_read_explorer_follows_the_three_times(capsys):
    w = widgets.late_read_explorer(launch_us=30, host_us=50, gpu_us=100)
    assert w.result[False]["period"] == 30 + 100 + 50  # launch, the step, the host's part
    assert w.result[True]["period"] == 100  # launch and host's part under the step
    assert w.result[True]["busy"] == 1 and w.result[False]["busy"] == 100 / 180
    assert "overlap=True : a turn every 100 µs, GPU busy 100%" in capsys.readouterr().out
    control(w, "launch").value = 60  # launch and the rest longer than the step: the host sets it
    assert w.result[True]["period"] == 60 + 50
    assert w.result[True]["busy"] == 100 / 110 and w.result[False]["period"] == 60 + 100 + 50


def test_admission_explorer_counts_fewer_admissions_as_min_admit_grows(toy_model, capsys):
    w = widgets.admission_explorer(toy_model, n_rows=8, n_requests=24)
    one = w.result
    control(w, "min_admit").value = 8
    eight = w.result
    assert one["min_admit"] == 1 and eight["min_admit"] == 8
    assert eight["admissions"] < one["admissions"] and eight["rows_a_step"] < one["rows_a_step"]
    assert "admissions" in capsys.readouterr().out


def test_floor_explorer_multiplies_the_recorded_kernels_by_the_recorded_floor(capsys):
    from tinyllm.lab.results import load_floor, load_paged

    floor, paged = load_floor(), load_paged()
    w = widgets.floor_explorer(floor, paged)
    rows = {r["name"]: r for r in paged["paged"]["rows"]}
    assert list(control(w, "step").options) == list(rows)
    assert control(w, "step").value == "paged fused, ideal host"
    assert (
        w.result["floor_us"]
        == rows["paged fused, ideal host"]["kernels"] * floor["triton"]["us_per_node"]
    )
    control(w, "way").value = "triton, PDL"
    control(w, "step").value = "graph, ideal host"
    assert (
        w.result["floor_us"]
        == rows["graph, ideal host"]["kernels"] * floor["triton, PDL"]["us_per_node"]
    )
    assert "of the step" in capsys.readouterr().out


@pytest.mark.parametrize("value", [0, 1010, -5, "30", True, None])
def test_a_knob_set_outside_its_slider_is_refused_not_clamped(value):
    with pytest.raises(ValueError, match=r"launch \(µs\): .* is outside the slider's \[10, 1000\]"):
        widgets.late_read_explorer(launch_us=value)
    widgets.late_read_explorer(launch_us=550)  # a profiled launch's length: within the slider
