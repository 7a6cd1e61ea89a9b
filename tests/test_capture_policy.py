"""tinyllm.lab.capture_policy: the engines' capture sizes, padding on a workload, and the
measurement's keys (through lab.simgraph)."""

import pytest
import torch

from tinyllm import PagedEngine
from tinyllm.graphs import default_capture_sizes
from tinyllm.lab import capture_policy as cp
from tinyllm.lab import simgraph
from tinyllm.validate import validate_capture_sizes

MAX_BATCHES = (1, 2, 4, 5, 8, 20, 32, 36, 40, 64, 100, 256, 300, 600)

# Each cited formula at a few maximum batches, written out by hand.
CITED = [
    ("nano-vllm", 4, [1, 2, 4, 8]),  # [1, 2, 4, 8] whatever the maximum
    ("nano-vllm", 32, [1, 2, 4, 8, 16, 32]),
    ("nano-vllm", 100, [1, 2, 4, 8, 16, 32, 48, 64, 80, 96]),
    ("vllm", 2, [1, 2, 4]),  # up to 2 × max_num_seqs
    ("vllm", 32, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),
    ("vllm", 200, [1, 2, 4, *range(8, 256, 8), *range(256, 401, 16)]),
    ("sglang", 8, [1, 2, 4, 7, 8]),  # size - 1 and size added
    ("sglang", 32, [1, 2, 4, 8, 16, 24, 31, 32]),
    ("sglang", 300, [1, 2, 4, 8, *range(16, 257, 8)]),
    ("tgi", 8, [1, 2, 4, 8, 16, 32]),
    ("tgi", 300, [1, 2, 4, 8, 16, 32]),
]

# Where an engine's list stops short of the maximum batch (those batches run eagerly there).
STOPS_SHORT = {
    "tgi": lambda m: m > 32,
    "nano-vllm": lambda m: m > 512 or (m > 8 and m % 16 != 0),  # at most 512
    "sglang": lambda m: m > 256,
    "vllm": lambda m: m > 512,  # its cap
}


@pytest.mark.parametrize("name, max_batch, expected", CITED)
def test_each_preset_reproduces_its_cited_formula(name, max_batch, expected):
    assert cp.PRESETS[name](max_batch) == expected


def test_vllm_captures_51_sizes_at_its_largest():
    sizes = cp.vllm(256)  # 2 × 256 > 512: the cap
    assert len(sizes) == 51 and sizes[-1] == 512


def test_sglang_without_a_large_gpu_stops_at_160():
    assert cp.sglang(300, gpu_over_80gb=False)[-1] == 160
    assert cp.sglang(32, gpu_over_80gb=False) == cp.sglang(32)


@pytest.mark.parametrize("max_batch", MAX_BATCHES)
@pytest.mark.parametrize("name", list(cp.PRESETS))
def test_usable_sizes_are_sorted_and_reach_the_maximum_or_say_why_not(name, max_batch):
    sizes = cp.usable(cp.PRESETS[name](max_batch), max_batch)
    assert sizes == sorted(set(sizes)) and sizes[0] == 1
    assert all(c < max_batch for c in sizes[:-1])
    reaches = sizes[-1] >= max_batch
    assert reaches != STOPS_SHORT.get(name, lambda m: False)(max_batch)
    course = cp.for_course(cp.PRESETS[name](max_batch), max_batch)
    assert validate_capture_sizes(course, max_batch) == course  # the decoder takes it
    assert course[:-1] == tuple(c for c in sizes if c < max_batch)


def test_the_course_preset_is_the_decoders_default():
    for m in MAX_BATCHES:
        assert tuple(cp.course(m)) == default_capture_sizes(m)


def test_padding_on_a_hand_made_trace():
    out = cp.padding([1, 3, 5, 8, 2, 9], [8, 1, 2, 4])
    assert out["capture_size_per_step"] == [1, 4, 8, 8, 2, None]  # 9 rows: no graph holds them
    assert (out["rows"], out["padded_rows"], out["eager_steps"]) == (23, 4, 1)
    assert out["waste_share"] == round(4 / 23, 4)
    assert (out["graphs"], out["graphs_used"]) == (4, 4)
    assert out["steps_per_size"] == {"1": 1, "2": 1, "4": 1, "8": 2}
    assert cp.padding([], [1])["waste_share"] == 0.0


def test_the_simulated_engine_is_the_engine(toy_model):
    """occupancy() gives the rows of every step of a real paged engine, and
    capture_size_for() the capture size that engine picked (its own rule)."""
    news = [5, 1, 9, 3, 12, 2, 7, 1, 4, 6]
    engine = PagedEngine(toy_model, 3, max_len=32, use_graph=False)
    for i, n in enumerate(news):
        engine.submit([1 + i, 2, 3], n)
    engine.run()
    rows = [s["n_active"] for s in engine.stats]
    assert cp.occupancy(news, 3) == rows
    sizes = default_capture_sizes(3)
    assert [s["capture_size"] for s in engine.stats] == [
        cp.capture_size_for(n, sizes) for n in rows
    ]


def test_the_bench_workload_runs_each_request_once_per_token():
    """The prefill gives each request its first token, a step each of the others, and one
    step more runs before its end is read: a request of n tokens runs in n steps."""
    out = cp.compare_presets(32)
    decoded = out["n_tokens"]
    assert sum(out["rows_per_step"]) == decoded
    for name, row in out["presets"].items():
        assert row["rows"] - row["padded_rows"] == decoded, name
        assert row["eager_steps"] == 0 and row["capture_sizes"][-1] == 32
    p = out["presets"]
    assert p["course"]["waste_share"] == p["vllm"]["waste_share"]  # the same sizes up to 32
    assert p["tgi"]["waste_share"] > p["course"]["waste_share"]  # no 24
    assert p["vllm"]["captured_by_engine"][-1] == 64  # 2 × max_num_seqs


def test_measure_through_simgraph_gives_the_keys_and_no_bytes(toy_model):
    presets = {"course": cp.course, "tgi": cp.tgi}
    out = cp.measure(toy_model, 3, 32, graph_api=simgraph, presets=presets)
    assert out["graph_api"] == "tinyllm.lab.simgraph" and "None" in out["bytes"]
    assert set(out["presets"]) == set(presets)
    row = out["presets"]["tgi"]
    assert row["capture_sizes"] == [1, 2, 3] and row["graphs"] == 3
    for order in ("largest_first", "smallest_first"):
        assert row[f"{order}_capture_s"] > 0
        assert row[f"{order}_pool_bytes_after_each"] == [None] * 3
    for key in ("shared_pool_bytes", "largest_alone_pool_bytes", "linear_estimate_bytes",
                "vllm_profiler_estimate_bytes"):  # fmt: skip
        assert row[key] is None


def test_the_estimates_from_pool_sizes():
    out = cp.estimates([100, 130, 150])
    assert out == {"largest_alone_pool_bytes": 100, "linear_estimate_bytes": 300,
                   "vllm_profiler_estimate_bytes": 160}  # fmt: skip
    assert cp.estimates([70])["vllm_profiler_estimate_bytes"] == 70


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_the_cli_refuses_without_cuda(tmp_path):
    with pytest.raises(SystemExit, match="has none"):
        cp.main([str(tmp_path / "out.json")])
    assert not (tmp_path / "out.json").exists()


def test_the_recorded_padding_is_what_the_presets_give_on_the_workload():
    """results/h200_capture_policy.json's padding section is the host arithmetic of this
    module: a change to a preset or to the workload shows here (the recording's measured
    section, from the H200, is not recomputed)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "results" / "h200_capture_policy.json"
    recorded = json.loads(path.read_text())
    assert recorded["padding"] == json.loads(json.dumps(cp.compare_presets()))
    assert set(recorded["measured"]["presets"]) == set(recorded["padding"]["presets"])
