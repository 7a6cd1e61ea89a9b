"""viz.mechanism: the pictures of the mechanism run, their titles state their message, and
what they draw is their input, computed by the book (scenes.py): the static-cache grid's
attended cells are window_mask and its written cells where index_copy_ wrote, the bucket
windows are bucket_windows, the slot bars are a real Engine's stats, the pools and launches
are the recording's numbers (or say they are illustrative)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tinyllm import graphs, kv_cache
from tinyllm.course import viz  # noqa: E402
from tinyllm.course.viz import scenes  # noqa: E402
from tinyllm.lab import results


@pytest.fixture(autouse=True)
def no_leaked_figures():
    yield
    assert plt.get_fignums() == [], "a viz function left a figure open in pyplot"


def lane_spans(fig, lane: str) -> list[tuple[float, float]]:
    """(start, width) of the bars of one lane of launches_figure's top panel."""
    (bars,) = [c for c in fig.axes[0].collections if c.get_gid() == lane]
    return [(p.get_extents().x0, p.get_extents().width) for p in bars.get_paths()]


def test_launches_figure_draws_the_launch_schedule():
    fig = viz.launches_figure()  # illustrative: 12 kernels, 8 µs launches, 3 µs kernels
    c = scenes.ILLUSTRATIVE_LAUNCHES
    assert lane_spans(fig, "eager cpu") == [(8.0 * k, 8.0) for k in range(12)]
    assert lane_spans(fig, "eager gpu") == [(8.0 * (k + 1), 3.0) for k in range(12)]
    assert lane_spans(fig, "graph cpu") == [(0.0, c["graph_launch_us"])]
    assert lane_spans(fig, "graph gpu") == [(10.0 + 3.0 * k, 3.0) for k in range(12)]
    # idle share as drawn: 12 kernels of 3 µs in a 99 µs step
    assert fig.get_suptitle().startswith("One graph launch runs all 12 kernels back to back")
    assert f"idle {1 - 36 / 99:.0%} of the step" in fig.get_suptitle()
    assert "illustrative numbers, not a measurement" in viz.footnote_text(fig)


def test_launches_figure_on_the_recording(recorded):
    costs = viz.launch_costs(recorded)
    n = recorded["kernels_per_step"]["eager"]
    assert costs["kernels"] == n
    assert costs["launch_us"] * n == pytest.approx(recorded["cpu_time"]["eager_us"][0])
    assert costs["kernel_us"] * n == pytest.approx(recorded["gpu_kernel_time"]["eager_us"][0])
    assert costs["graph_launch_us"] == recorded["cpu_time"]["graph_us"][0]
    fig = viz.launches_figure(costs)
    assert [len(lane_spans(fig, lane)) for lane in ("eager gpu", "graph cpu", "graph gpu")] == [
        n, 1, n,
    ]  # fmt: skip
    span = fig.axes[0].get_xlim()[1] / 1.01
    assert min(w for _, w in lane_spans(fig, "eager gpu")) >= viz.MIN_BAR_SHARE * span * 0.999
    note = viz.footnote_text(fig)
    assert note.startswith(f"Numbers: {results.provenance_label(recorded)}") and "widened" in note


@pytest.mark.parametrize(
    "kw", [{}, {"pad_lens": (0, 2), "prompt_len": 5, "steps": 4, "buckets": (8, 16, 24)}]
)
def test_static_cache_figure_is_the_static_cache(kw):
    step = scenes.static_cache_step(**kw)
    pos, window = step["pos"], step["window"]
    assert window == graphs.bucket_for(pos + 1, step["buckets"])
    mask = kv_cache.window_mask(pos, window, step["first_valid"])
    assert torch.equal(step["attended"], mask)  # the cache's own decode bias is window_mask
    written = step["written"].nonzero().tolist()
    assert written == [[row, pos] for row in range(len(step["first_valid"]))]  # index_copy_
    fig = viz.static_cache_figure(step)
    (ax,) = fig.axes
    cells = np.asarray(ax.images[0].get_array())
    assert np.array_equal(cells[:, :window] == 1, mask.numpy())  # attended cells == mask
    assert (cells[:, window:] == 0).all()  # beyond the window: not read
    pads = np.arange(cells.shape[1])[None, :] < np.asarray(step["first_valid"])[:, None]
    assert np.array_equal(cells[:, :window] == 3, pads[:, :window])
    boxes = sorted(p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("written"))
    assert boxes == [f"written {row} {pos}" for row in range(len(step["first_valid"]))]
    assert [line.get_xdata()[0] for line in ax.lines] == [window - 0.5]  # the window's end
    assert f"pos = {pos}" in ax.get_title() and f"window of {window}" in ax.get_title()


@pytest.mark.parametrize(
    "max_len, buckets, lengths",
    [(1024, None, None), (10, (4, 8, 10), range(1, 11)), (300, (100, 300), (1, 50, 101))],
)
def test_buckets_figure_draws_bucket_windows(max_len, buckets, lengths):
    fig = viz.buckets_figure(max_len, buckets, lengths)
    (ax,) = fig.axes
    b = graphs.resolve_buckets(buckets, max_len)
    lengths = scenes.walk_lengths(b) if lengths is None else list(lengths)
    gids = [p.get_gid() or "" for p in ax.patches]
    drawn = [p.get_width() for p, g in zip(ax.patches, gids) if g.startswith("window")]
    assert drawn == [graphs.bucket_windows(b, max_len)[n - 1] for n in lengths]
    needed = [p.get_width() for p, g in zip(ax.patches, gids) if g.startswith("needed")]
    assert needed == lengths
    captured = [t.get_text() for t in ax.texts if "captured" in t.get_text()]
    assert captured == [f"graph {w}: captured (first use)" for w in dict.fromkeys(drawn)]
    assert f"walks through {len(b)} windows" in ax.get_title()


@pytest.mark.parametrize("recorded_pools", [True, False])
def test_pool_figure_sizes_are_the_recorded_pools(recorded_pools, recorded):
    res = recorded if recorded_pools else None
    cap = recorded["capture"] if recorded_pools else scenes.ILLUSTRATIVE_POOLS
    (ax,) = viz.pool_figure(res).axes
    box = {p.get_gid(): p.get_height() for p in ax.patches}
    own = [box[f"own pool {w}"] for w in cap["windows"]]
    assert own == [b / viz.MIB for b in cap["pool_bytes"]]
    assert box["shared pool"] == cap["shared_pool_bytes"] / viz.MIB
    if recorded_pools:
        assert sum(own) == recorded["capture"]["separate_pools_bytes"] / viz.MIB
    fig = viz.pool_figure(res)
    note = results.provenance_label(recorded) if recorded_pools else "illustrative numbers"
    assert note in viz.footnote_text(fig)
    assert f"holds {viz.sig3(box['shared pool'])} MiB" in fig.axes[0].get_title()


@pytest.fixture(scope="module")
def engine_run(shipped_model):
    return viz.engine_slots_run(model=shipped_model)


def test_slots_figure_draws_the_engines_stats(engine_run):
    stats, n_slots = engine_run["stats"], engine_run["n_slots"]
    fig = viz.slots_figure(engine_run)
    (ax,) = fig.axes
    drawn = [[None] * n_slots for _ in stats]
    for bar in ax.patches:
        rid = int(bar.get_gid().split()[1])
        for step in range(round(bar.get_x() + 0.5), round(bar.get_x() + 0.5 + bar.get_width())):
            assert drawn[step][round(bar.get_y() + bar.get_height() / 2)] is None
            drawn[step][round(bar.get_y() + bar.get_height() / 2)] = rid
    assert drawn == [st["slots"] for st in stats]  # the bars are Engine.stats
    outputs, eos = engine_run["outputs"], engine_run["eos_id"]
    ends = [line.get_gid() for line in ax.lines if (line.get_gid() or "").startswith("end")]
    by_eos = sum(out[-1] == eos for out in outputs.values())
    assert 0 < by_eos < len(outputs)  # the demo shows both ways out
    assert sorted(ends) == sorted(
        "end EOS" if o[-1] == eos else "end length" for o in outputs.values()
    )
    for rid, out in outputs.items():  # a request holds its slot one step per token after the first
        assert sum(row.count(rid) for row in drawn) == len(out) - 1
    assert "each enters the lowest free slot" in ax.get_title()
    assert "3 queued requests take a slot freed the step before" in ax.get_title()


def test_slots_figure_says_when_a_request_skips_the_lowest_free_slot():
    stats = [
        {"step": 0, "slots": [0, 1, None], "window": 8, "n_active": 2, "step_s": 0.0},
        {"step": 1, "slots": [None, 1, 2], "window": 8, "n_active": 2, "step_s": 0.0},
    ]
    run = {"stats": stats, "n_slots": 3, "eos_id": 9, "eos": "\t", "model": "none",
           "outputs": {0: [1, 9], 1: [1, 2, 3], 2: [1, 2]}}  # fmt: skip
    events = scenes.slot_events(run)
    assert [(e["rid"], e["lowest_free"], e["end"]) for e in events] == [
        (0, True, "EOS"), (1, True, "length"), (2, False, "length"),
    ]  # fmt: skip
    title = viz.slots_figure(run).axes[0].get_title()
    assert "each enters a free slot" in title and "lowest" not in title


@pytest.mark.parametrize(
    "draw, message",
    [
        (viz.launches_figure, "One graph launch runs all 12 kernels back to back"),
        (viz.static_cache_figure, "Static KV cache at pos = 11: the step writes its keys in place"),
        (viz.buckets_figure, "A growing sequence walks through 4 windows (128, 256, 512, 1024)"),
        (viz.pool_figure, "4 graphs replay one at a time, so they can share one pool"),
    ],
)
def test_every_picture_runs_and_states_its_message(draw, message):
    fig = draw()
    fig.draw_without_rendering()
    assert (fig.get_suptitle() or fig.axes[0].get_title()).startswith(message)
