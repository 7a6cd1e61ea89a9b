"""viz.pages: the paged cache's picture is drawn from the book's PagedKVCache, and the paged
section's figures from its recording, titled with what the data says."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tinyllm.course import viz  # noqa: E402
from tinyllm.lab import results  # noqa: E402
from tinyllm.lab.pages import long_over_short  # noqa: E402


def test_a_scene_takes_blocks_at_block_boundaries():
    s = viz.pages_scene((5, 9, 3), block_size=4)
    assert [len(t) for t in s["tables"]] == [2, 3, 1]  # ceil(n / 4)
    assert s["lens"] == s["lens_dev"] == [5, 9, 3]
    s = viz.pages_scene((5, 8, 3), block_size=4, steps=1)  # 8 → 9 crosses into a third block
    assert [len(t) for t in s["tables"]] == [2, 3, 1] and s["lens"] == [6, 9, 4]
    assert s["block_table"][1][:3] == s["tables"][1] and s["block_table"][1][3:] == [0] * 5


def test_a_scene_accounts_for_every_block():
    s = viz.pages_scene((5, 9, 3), block_size=4, steps=3)
    held = [b for t in s["tables"] for b in t]
    assert sorted(held + s["free"]) == list(range(1, s["n_blocks"]))  # block 0: scratch
    assert s["owner"][0] is None and 0 not in held
    for row, table in enumerate(s["tables"]):
        assert sum(s["filled"][b] for b in table) == s["lens"][row]
        assert all(s["owner"][b] == row for b in table)


def test_release_returns_the_blocks_and_compaction_moves_the_table_row():
    before = viz.pages_scene((5, 9, 3), block_size=4, steps=2)
    released = viz.pages_scene((5, 9, 3), block_size=4, steps=2, release=0)
    assert released["tables"][0] == [] and released["lens"][0] == 0
    assert len(released["free"]) == len(before["free"]) + len(before["tables"][0])
    compacted = viz.pages_scene((5, 9, 3), block_size=4, steps=2, release=0, compact=True)
    assert compacted["tables"][0] == before["tables"][2]  # the last request, same blocks
    assert compacted["lens"] == [before["lens"][2], before["lens"][1], 0]
    assert compacted["lens"] == compacted["lens_dev"]


def test_pages_figure_draws_the_scene():
    s = viz.pages_scene((5, 9, 0), block_size=4, steps=1)
    fig = viz.pages_figure(s)
    assert isinstance(fig, Figure)
    fig.canvas.draw()
    assert "2 requests hold 5 blocks" in fig.get_suptitle()


def test_the_paged_figures_state_what_the_recording_says():
    paged = results.load_paged()
    fig = viz.paged_sweep_figure(paged)
    title = fig.axes[0].get_title()
    for name in ("windowed fused", "paged fused"):
        rise = long_over_short(paged["paged"]["sweep"], name)
        assert f"the {name} step" in title and f"{viz.sig3(rise)}×" in title
    assert len(fig.axes[0].get_lines()) == 4  # the windowed and paged lines, unfused and fused
    assert viz.footnote_text(fig).splitlines()[0] == results.provenance_label(paged)
    att = paged["paged"]["attention"]["1"]
    ratio = att["sdpa_window_us"][-1] / att["paged_kernel_us"][-1]
    fig = viz.attention_figure(paged)
    title = fig.axes[0].get_title()
    assert f"batch 1, the paged kernel is {viz.sig3(ratio)}× as fast" in title
    op = att["fused_op_us"]
    assert f"rope_write_attend takes {viz.sig3(min(op))} to {viz.sig3(max(op))} µs" in title
    assert len(fig.axes[0].get_lines()) == 3  # SDPA, the paged kernel, the step's op
    fig.canvas.draw()


@pytest.mark.parametrize("batch", ["1", "8"])
def test_attention_figure_takes_each_recorded_batch(batch):
    fig = viz.attention_figure(results.load_paged(), batch)
    assert f"batch {batch}" in fig.axes[0].get_ylabel()


TWO_SWEEPS = {  # a figure of two recorded sweeps: its recording, and its lines' names there
    "splits_figure": (results.load_splits, ("16 shares (the package)", "64 shares")),
    "tensor_cores_figure": (results.load_dot, ("before (76ed87c)", "now")),
}


@pytest.mark.parametrize("figure", TWO_SWEEPS)
@pytest.mark.parametrize("batch", ["1", "8"])
def test_a_two_sweeps_figure_draws_both_and_states_their_rise(figure, batch):
    load, names = TWO_SWEEPS[figure]
    rec = load()
    fig = getattr(viz, figure)(rec, batch)
    lines, title = fig.axes[0].get_lines(), fig.axes[0].get_title()
    for line, name in zip(lines, names, strict=True):
        sw = rec[f"sweep_{batch}"][name]
        assert list(line.get_ydata()) == sw["paged fused_us"][1:]  # the first bin left out
        assert f"{viz.sig3(long_over_short(sw, 'paged fused'))}×" in title
    assert title.startswith(f"Batch {batch}:")
    assert viz.footnote_text(fig).splitlines()[0] == results.provenance_label(rec)
    fig.canvas.draw()


def test_the_tensor_cores_figure_names_the_form_that_runs_now():
    dot = results.load_dot()
    legend = {
        b: viz.tensor_cores_figure(dot, b).axes[0].get_legend_handles_labels()[1] for b in "18"
    }
    assert legend["1"][1] == "now: the same sums of products"
    assert legend["8"][1] == "now: tensor cores"


def rule_lowest_from(sweeps: dict) -> int:
    """The first position from which the rule's line is the lowest to the end (second bin on)."""
    first = sweeps["package"]
    for i, start in enumerate(first["positions"][1:], 1):
        if all(
            sweeps["package"]["paged fused_us"][j]
            == min(sw["paged fused_us"][j] for sw in sweeps.values())
            for j in range(i, len(first["positions"]))
        ):
            return start
    return -1


@pytest.mark.parametrize("batch", ["1", "8"])
def test_the_short_rows_figure_draws_every_form_and_says_where_the_rule_wins(batch):
    rec = results.load_short_rows()
    sweeps = rec[f"sweep_{batch}"]
    fig = viz.short_rows_figure(rec, batch)
    ax = fig.axes[0]
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [
        sw["paged fused_us"][1:] for sw in sweeps.values()
    ]  # every form, the first bin left out
    labels = ax.get_legend_handles_labels()[1]
    assert labels[0] == f"the rule, {rec['package_splits'][batch]} splits"
    assert labels[1:] == list(sweeps)[1:]
    title = ax.get_title()
    assert f"lowest from position {rule_lowest_from(sweeps)} on" in title
    assert viz.footnote_text(fig).splitlines()[0] == results.provenance_label(rec)
    fig.canvas.draw()


def test_the_short_rows_title_lists_the_lowest_lines_when_the_rule_does_not_end_lowest():
    rec = results.load_short_rows()
    sweeps = rec["sweep_8"]
    sweeps["4 splits"]["paged fused_us"][-1] = 0.0  # the last bin: 4 splits lowest
    title = viz.short_rows_figure(rec, "8").axes[0].get_title()
    assert title.startswith("Batch 8, the lowest line: ") and title.endswith("4 splits to 1023")
    assert "lowest from position" not in title


@pytest.mark.parametrize("name", TWO_SWEEPS)
@pytest.mark.parametrize("batch", ["4", 2, "one", None])
def test_a_sweep_figure_names_the_swept_batches_for_one_it_lacks(name, batch):
    load, _ = TWO_SWEEPS[name]
    with pytest.raises(ValueError, match=r"this recording holds batch '1' and '8' only"):
        getattr(viz, name)(load(), batch)


@pytest.mark.parametrize("batch", ["4", 2, None])
def test_the_attention_figure_names_the_recorded_batches_for_one_it_lacks(batch):
    with pytest.raises(ValueError, match=r"this recording holds batch '1' and '8' only"):
        viz.attention_figure(results.load_paged(), batch)
    assert viz.attention_figure(results.load_paged(), 8).axes  # an int names batch "8"
