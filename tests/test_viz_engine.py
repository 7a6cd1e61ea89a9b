"""viz.engine: the engine's figures draw the recording's sections, lanes and presets, titled
with what the data says; the live counts count what the engine does."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tinyllm import Engine, PagedEngine  # noqa: E402
from tinyllm.course import viz  # noqa: E402
from tinyllm.lab import results  # noqa: E402
from tinyllm.lab.engine_time import ENGINES, SECTIONS  # noqa: E402


@pytest.fixture
def rec():
    return results.load_engine()


def test_variants_follow_the_engines_order_and_keep_a_new_one(rec):
    detail = rec["engine_paged"]["detail"]["32"]
    assert viz.engine_variants(detail) == [k for k in ENGINES if k in detail]
    more = dict(detail, paged_new=dict(detail["paged"]))
    assert viz.engine_variants(more)[-1] == "paged_new"


def test_sections_figure_stacks_each_recorded_share(rec):
    groups = viz.recorded_groups(rec)
    assert list(groups) == ["32 rows", "8 rows"]
    fig = viz.sections_figure(groups, rec)
    assert isinstance(fig, Figure)
    for ax, rows in zip(fig.axes, groups.values()):
        heights = [p.get_height() for p in ax.patches]
        want = [100 * max(0.0, rows[v]["sections"][s]) for v in rows for s in SECTIONS]
        assert heights == pytest.approx(want)
    rows = groups["32 rows"]
    first, last = rows["slots"]["tok_s"], rows["paged_overlap"]["tok_s"]
    title = fig.get_suptitle()
    # at 8 rows not every improvement cut the largest section
    assert title.startswith("The host's sections of the wall time, improvement by improvement")
    assert f"{viz.sig3(first)} to {viz.sig3(last)} tok/s at 32 rows" in title
    assert "GPU" not in title  # a profiled run's busy share is another run: not in this figure
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert not any("busy" in t for t in texts)
    assert viz.footnote_text(fig).splitlines()[0] == results.provenance_label(rec)
    fig.canvas.draw()


def test_each_change_cuts_the_largest_section_is_read_from_the_rows(rec):
    """At 32 rows each recorded change cut the largest section before it; at 8 rows the
    prefill graphs left reading ids, the largest, a larger share. The title claims the rule
    only for rows that bear it out."""
    groups = viz.recorded_groups(rec)
    assert viz.each_change_cuts_the_largest(groups["32 rows"])
    assert not viz.each_change_cuts_the_largest(groups["8 rows"])
    title = viz.sections_figure({"32 rows": groups["32 rows"]}, rec).get_suptitle()
    assert title.startswith("Each improvement cuts the host's largest section")
    rows = {k: dict(v) for k, v in groups["32 rows"].items()}
    rows["paged"] = dict(rows["paged"], sections=dict(rows["slots"]["sections"]))
    assert not viz.each_change_cuts_the_largest(rows)
    title = viz.sections_figure({"32 rows": rows}, rec).get_suptitle()
    assert title.startswith("The host's sections of the wall time")


def test_sections_figure_of_a_live_run_has_no_gpu_claim():
    rows = {"slots": {"tok_s": 10.0, "sections": dict.fromkeys(SECTIONS, 0.25)}}
    fig = viz.sections_figure({"this CPU": rows})
    assert "GPU" not in fig.get_suptitle() and viz.footnote_text(fig) == ""


def test_overlap_timeline_draws_the_recorded_lanes(rec):
    fig = viz.overlap_timeline_figure(rec, "32")
    detail = rec["engine_paged"]["detail"]["32"]
    profiled = [
        name for name in detail if isinstance(detail[name], dict) and "timeline" in detail[name]
    ]
    assert len(fig.axes) == len(profiled) >= 2  # before every change and after all of them
    for ax, name in zip(fig.axes, profiled):
        tl = detail[name]["timeline"]
        gpu = [c for c in ax.collections if c.get_facecolor()[0][1] > 0.5]  # the green lane
        assert len(ax.collections) == 4  # three host lanes and the GPU's
        assert gpu
        share = viz.busy_us(tl["gpu"]) / tl["window_us"]
        assert f"{name} {share:.0%}" in fig.get_suptitle()


def test_capture_policy_figure_names_the_least_padding():
    cp = results.load_capture_policy()
    table = viz.preset_table(cp)
    assert [r["preset"] for r in table] == list(cp["padding"]["presets"])
    fig = viz.capture_policy_figure(cp)
    best = min(table, key=lambda r: r["waste_share"])
    assert f"{best['preset']} pads least ({best['waste_share']:.2%})" in fig.get_suptitle()
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == pytest.approx([100 * r["waste_share"] for r in table])


def test_prefill_forwards_counts_one_per_request_alone_fewer_in_batches(toy_model):
    prompts, news = [[1, 2, 3]] * 5, [2] * 5
    alone = viz.prefill_forwards(Engine(toy_model, 4, max_len=32, use_graph=False), prompts, news)
    assert alone["forwards"] == 5
    paged = PagedEngine(toy_model, 4, max_len=32, use_graph=False)
    batched = viz.prefill_forwards(paged, prompts, news)
    assert batched["forwards"] == batched["admissions"] == 2  # 4 admitted together, then 1


def test_count_ops_does_not_grow_with_rows(toy_model):
    one = viz.count_ops(lambda: toy_model(torch.zeros(1, 4, dtype=torch.long)))
    four = viz.count_ops(lambda: toy_model(torch.zeros(4, 4, dtype=torch.long)))
    assert one == four > 10


def test_scale_figure_draws_the_recorded_rows_and_before_only_when_recorded():
    from tinyllm.course.viz.engine import scale_figure

    rec = results.load_engine_scale()
    rows = sorted(rec["rows"], key=lambda r: r["n_rows"])
    n = [r["n_rows"] for r in rows]
    fig = scale_figure(rec)
    left, right = fig.axes[:2]
    drawn = {line.get_label(): line for ax in (left, right) for line in ax.get_lines()}
    host = drawn["host, per step (median)"]
    assert list(host.get_xdata()) == n
    assert list(host.get_ydata()) == [r["host_us_per_step"] for r in rows]
    replay = drawn["the all-rows graph, replayed alone"]
    assert list(replay.get_ydata()) == [r["replay_alone_us"] for r in rows]
    assert list(drawn["PagedEngine"].get_ydata()) == [r["tok_s"] for r in rows]
    gpu = [r["gpu_us_per_step"] + r["fills"] * r["gpu_us_per_fill"] / r["steps"] for r in rows]
    assert list(drawn["GPU, per step (mean, prefills included)"].get_ydata()) == pytest.approx(gpu)
    assert left.get_xscale() == "log"
    assert len(left.get_lines()) + len(right.get_lines()) == 4 + 3 * bool(rec.get("before"))
    before = sorted(rec["before"], key=lambda r: r["n_rows"])
    gpu_before = drawn[f"GPU, {rec['before_label']}"].get_ydata()
    assert list(gpu_before) == pytest.approx([viz.engine.gpu_per_step(r) for r in before])
    last = rows[-1]
    title = fig.get_suptitle()
    assert f"{viz.sig3(rows[0]['tok_s'])} to {viz.sig3(last['tok_s'])} tok/s" in title
    host_us, replay_us = last["host_us_per_step"], last["replay_alone_us"]
    if host_us > replay_us:
        assert f"{viz.sig3(host_us / replay_us)}× the replay alone" in title
    assert viz.footnote_text(fig).splitlines()[0] == results.provenance_label(rec)
    fig.canvas.draw()

    keys = ("n_rows", "tok_s", "host_us_per_step")
    old = [{k: r[k] / (2 if k != "n_rows" else 1) for k in keys} for r in rows[2:]]
    with_before = scale_figure(dict(rec, before=old, before_label="min_admit=1"))
    lines = {line.get_label(): line for ax in with_before.axes[:2] for line in ax.get_lines()}
    host_before = lines["host, min_admit=1"]
    assert list(host_before.get_ydata()) == [r["host_us_per_step"] for r in old]
    assert list(lines["min_admit=1"].get_ydata()) == [r["tok_s"] for r in old]
    assert len(with_before.axes[0].get_lines()) == 4  # no GPU markers: old holds no GPU times


def test_scale_figure_says_when_the_host_keeps_within_the_replay():
    from tinyllm.course.viz.engine import scale_figure

    rec = results.load_engine_scale()
    rows = [dict(r, host_us_per_step=r["replay_alone_us"] / 2) for r in rec["rows"]]
    title = scale_figure(dict(rec, rows=rows)).get_suptitle()
    assert "within the replay's" in title and "× the replay alone" not in title


@pytest.mark.parametrize("host, gpu", [(60, 100), (150, 100), (10, 300), (300, 10)])
def test_the_late_read_schedule_is_the_engine_s_turn(host, gpu):
    """overlap=False: a turn is the launch, the step and the host's part in a row; True: the
    longer of the step and the host's part with its launch. The GPU never runs two steps at
    once, nor a step before its launch; the host hands out only once its wait is over."""
    launch = 10.0
    for overlap, period in ((False, launch + gpu + host), (True, max(gpu, launch + host))):
        sc = viz.late_read_schedule(host, gpu, overlap, turns=6, launch_us=launch)
        assert sc["period"] == pytest.approx(period)
        for (_, end), (begin, _) in zip(sc["gpu"], sc["gpu"][1:]):
            assert begin >= end
        for (_, launched), (begin, _) in zip(sc["launch"], sc["gpu"]):
            assert begin >= launched
        for (a, b), (h, _) in zip(sc["wait"], sc["host"]):
            assert a <= b == h
        if not overlap:  # the host waits for the step itself
            assert [b for _, b in sc["wait"]] == [end for _, end in sc["gpu"]]
        assert sc["busy"] == pytest.approx(gpu / period)


def test_the_late_read_figure_says_what_its_schedules_say():
    fig = viz.late_read_figure(60, 100)
    title = fig.get_suptitle()
    for overlap in (False, True):
        sc = viz.late_read_schedule(60, 100, overlap)
        assert f"overlap={overlap}: a turn every {viz.sig3(sc['period'])} µs" in title
        assert f"GPU busy {sc['busy']:.0%}" in title
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["overlap=False", "overlap=True"]
    fig.canvas.draw()
