"""viz: every figure runs on data shaped like results/README.md's schema, and what it draws
is its input (mask image == mask, slot bars == Engine.stats, bucket edges by hand)."""

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tinyllm import Engine, StaticKVCache, Transformer, get_config, graphs, kv_cache
from tinyllm.course import viz  # noqa: E402
from tinyllm.kv_cache import padded_causal_mask  # noqa: E402
from tinyllm.lab import results
from tinyllm.model import Rope

BATCHES = [1, 2, 4, 8, 16, 32, 64]


def fake_results(date="2026-11-30"):
    """A results/<gpu>.json as results/README.md describes it, with made-up numbers."""

    def times(eager, static, graph):  # µs per step, growing slowly with the batch
        return {
            "batch": BATCHES,
            "eager_us": [eager + 2 * b for b in BATCHES],
            "static_us": [static + 2 * b for b in BATCHES],
            "graph_us": [graph + b for b in BATCHES],
        }

    windows = [128, 256, 512, 1024]
    return {
        "provenance": {
            "gpu": "NVIDIA H200",
            "torch": "2.11.0+cu130",
            "cuda": "13.0",
            "python": "3.12.3",
            "date": date,
            "commit": "abc1234def5678",
            "command": "python -m tinyllm.lab.bench",
        },
        "operating_point": {
            "model": "tiny",
            "n_params": 3280128,
            "prompt_len": 32,
            "decode_steps": 256,
            "max_len": 1024,
            "buckets": windows,
            "dtype": "bfloat16",
            "timing": "CUDA events, median",
        },
        "step_time": {**times(1500, 1600, 90), "speedup": [16.0] * len(BATCHES)},
        "cpu_time": times(1400, 1500, 12),
        "gpu_kernel_time": times(80, 95, 70),
        "kernels_per_step": {"eager": 180, "static": 190, "graph": 190},
        "graph_busy_fraction": {"batch": BATCHES, "fraction": [0.8] * len(BATCHES)},
        "bandwidth": {"weight_bytes": 6560256, "copy_GBps": 4000.0, "floor_us": 1.64},
        "capture": {
            "windows": windows,
            "capture_s": [0.05, 0.04, 0.03, 0.02],
            "pool_bytes": [2**20, 2**21, 2**22, 2**23],
            "total_capture_s": 0.15,
            "shared_pool_bytes": 2**23,
            "separate_pools_bytes": 15 * 2**20,
        },
        "engine": {
            "n_slots": 8,
            "n_requests": 32,
            "prompt_lens": [8, 64],
            "max_new_tokens": [16, 128],
            "eager_tok_s": 900.0,
            "graph_tok_s": 9000.0,
            "speedup": 10.0,
            "eager_s": 4.0,
            "graph_s": 0.4,
            "n_tokens": 3600,
        },
        "bit_exact": {
            "batch": 4,
            "pad_lens": [0, 3, 5, 0],
            "steps": 256,
            "windows": windows,
            "all_equal": True,
            "first_difference": None,
        },
        "eager_vs_static": {
            "steps": 3,
            "max_logit_diff": 2e-2,
            "max_logit_diff_per_step": [0.0, 1e-3, 2e-2],  # as bench.py writes
            "token_agreement": 0.99,
            "first_flip_step": 2,
            "flips": [{"step": 2, "row": 1, "margin": 0.01}],
        },
        "torch_compile": {"step_us": 100.0, "compile_s": 30.0, "captured_graph": True, "note": ""},
    }


def fake_trace():
    """traces/<gpu>.json: two steps per method; eager kernels separated by launch gaps."""

    def steps(gap, n=6):
        events, t = [], 0.0
        for step in range(2):
            for k in range(n):
                for kind, start, dur in (("cpu", t, 1.0), ("gpu", t + 0.5, 3.0)):
                    events.append(
                        {
                            "step": step,
                            "name": f"k{k}",
                            "start_us": start,
                            "dur_us": dur,
                            "kind": kind,
                        }
                    )
                t += 3.0 + gap
        return events

    return {"batch": {str(b): {"eager": steps(gap=5.0), "graph": steps(gap=0.0)} for b in (1, 64)}}


def fake_stats():
    """Engine.stats of 3 slots: request 0 leaves after step 1, request 3 takes its slot."""
    slots = [[0, 1, 2], [0, 1, 2], [3, 1, None], [3, None, None]]
    return [
        {"step": i, "slots": s, "window": 128, "n_active": 3 - s.count(None), "step_s": 1e-3}
        for i, s in enumerate(slots)
    ]


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
    # and it is the mask the static cache builds for its decode step
    cache = StaticKVCache(1, 3, 8, "cpu")
    cache.reset(torch.tensor([0, 3, 5]))
    cache.pos.fill_(5)
    with cache.decoding(8):
        cache.begin_step(1, Rope(2, 8, 10000.0))
    assert torch.equal(cache.attn_kwargs["attn_mask"][:, 0, 0], m)


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


@pytest.mark.parametrize("stats", [fake_stats(), engine_stats()], ids=["fixture", "engine"])
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


def test_slot_segments_split_a_slot_between_requests():
    assert viz.slot_segments(fake_stats(), 3) == [  # (slot, request, first step, n steps)
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
            [0, 1, 2],
            r["eager_vs_static"]["max_logit_diff_per_step"],
            r["eager_vs_static"]["flips"],
        ),
        lambda r, t: viz.logit_diff_figure([0, 1], [0.0, 0.0]),
        lambda r, t: viz.loss_figure(
            json.loads((results.RESULTS_DIR / "train" / "run_a.json").read_text())["history"]
        ),
    ],
)
def test_every_figure_runs_on_the_schema(draw):
    fig = draw(fake_results(), fake_trace())
    assert isinstance(fig, Figure)
    fig.canvas.draw()  # layout and text render without error
    assert fig.axes[0].get_title() or fig.get_suptitle()


def test_titles_state_what_the_data_says():
    res = fake_results()
    assert "launch-bound" in viz.step_time_figure(res).axes[0].get_title()
    res["step_time"]["eager_us"] = [100 * b for b in BATCHES]
    assert "launch-bound" not in viz.step_time_figure(res).axes[0].get_title()
    assert viz.timeline_figure(fake_trace(), 1).get_suptitle().startswith("Graph replay removes")
    with pytest.raises(ValueError, match="recorded batches"):
        viz.cpu_gpu_figure(res, 3)


def test_results_prefers_a_learners_file(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    assert results.load_results() is None
    (tmp_path / "h200.json").write_text(json.dumps(fake_results("2026-11-30")))
    assert results.load_results()["file"] == "h200.json"
    for name, date in (("rtx4090", "2026-12-01"), ("a100", "2026-12-05")):
        (tmp_path / f"{name}.json").write_text(json.dumps(fake_results(date)))
    res = results.load_results()
    assert res["file"] == "a100.json"
    assert results.load_results("rtx4090")["provenance"]["date"] == "2026-12-01"
    assert results.provenance_label(res) == (
        "recorded on NVIDIA H200, torch 2.11.0+cu130, 2026-12-05, commit abc1234"
    )
    assert results.load_trace(res) is None
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "a100.json").write_text(json.dumps(fake_trace()))
    assert results.load_trace(res) == fake_trace()


def test_capture_cost_sums_only_measured_windows():
    cost = results.capture_cost(fake_results(), (128, 192, 1024))
    assert cost == {
        "measured": [128, 1024],
        "not_measured": [192],
        "capture_s": pytest.approx(0.07),
        "pool_bytes": 2**20 + 2**23,
    }
