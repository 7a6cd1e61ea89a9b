"""tinyllm.lab.exactness: what SDPA returns for a fully masked row (notebooks 02 and 06);
eager decode vs the static step, with every margin (notebook 05). compare_replay is
exercised by the GPU tests."""

import copy
import json

import pytest
import torch
from conftest import recorded_results
from torch.nn.attention import SDPBackend

from tinyllm.lab import results
from tinyllm.lab.exactness import (
    compare_eager_static,
    fully_masked_row,
    what_came_back,
    without_onednn,
)


def test_fully_masked_row_on_this_cpu():
    rows = fully_masked_row()
    assert list(rows) == [
        "MATH, bool mask",
        "MATH, additive mask",
        "FLASH_ATTENTION, bool mask",
        "FLASH_ATTENTION, additive mask",
    ]
    for row in rows.values():
        assert set(row) == {"nan", "all_zero", "first_values"} and len(row["first_values"]) == 4
    # what the pinned torch does on a CPU; notebooks 02 and 06 print it live, and a new torch
    # that answers otherwise is worth a look at their prose
    assert {what_came_back(r) for r in rows.values()} == {"zeros"}, rows


def test_a_backend_without_a_kernel_is_an_error_entry():
    rows = fully_masked_row(backends=[SDPBackend.EFFICIENT_ATTENTION])  # none on a CPU
    assert set(rows) == {"EFFICIENT_ATTENTION, bool mask", "EFFICIENT_ATTENTION, additive mask"}
    assert all(set(r) == {"error"} for r in rows.values())
    assert what_came_back(rows["EFFICIENT_ATTENTION, bool mask"]).startswith("no kernel (")


@pytest.mark.parametrize(
    "row, words",
    [
        ({"nan": True, "all_zero": False, "first_values": [None] * 4}, "NaN"),
        ({"nan": False, "all_zero": True, "first_values": [0.0] * 4}, "zeros"),
        ({"nan": False, "all_zero": False, "first_values": [0.1, 0, 0, 0]}, "other values, [0.1"),
        ({"error": "No available kernel"}, "no kernel (No available kernel)"),
    ],
)
def test_what_came_back(row, words):
    assert what_came_back(row).startswith(words)


def test_the_probe_is_read_when_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYLLM_RESULTS", str(tmp_path))
    (tmp_path / "h200.json").write_text(json.dumps(recorded_results()))
    assert results.load_probe() is None
    probe = {"provenance": {"gpu": "NVIDIA H200", "torch": "2.13.0", "date": "2027-01-02"},
             "sdpa_fully_masked_row": fully_masked_row(dtype=torch.bfloat16)}  # fmt: skip
    (tmp_path / "h200_probe.json").write_text(json.dumps(probe))
    got = results.load_probe()
    assert got["file"] == "h200_probe.json"
    assert got["sdpa_fully_masked_row"] == probe["sdpa_fully_masked_row"]
    assert results.own_results() is None  # a probe is not a bench recording


def test_eager_vs_static_keeps_every_margin(toy_model):
    idx = torch.randint(0, 256, (2, 5))
    cmp = compare_eager_static(toy_model, idx, 6, buckets=(8, 16, 256))
    margins = cmp["margins"]
    assert len(margins) == 6 and all(len(m) == 2 and min(m) >= 0 for m in margins)
    closest = cmp["closest_call"]
    assert closest["margin"] == min(map(min, margins))
    assert closest["margin"] == margins[closest["step"]][closest["row"]]
    assert all(f["margin"] == margins[f["step"]][f["row"]] for f in cmp["flips"])


def test_bf16_on_the_cpu_flips_a_token_only_inside_its_margin(shipped_model, tokenizer):
    """Notebook 05's bf16 run, with PyTorch's own kernels: the static step's logits differ from
    eager decode's, and a greedy token flips only where the eager margin is at most twice that
    step's largest difference. Whether one flips depends on the CPU's bf16 kernels: one did on
    the CPU the notebook's outputs were saved on, none on an AMD EPYC."""
    model = copy.deepcopy(shipped_model).to(torch.bfloat16)
    prompts = ["The for statement", "The try statement", "The del statement"]
    idx = torch.tensor([tokenizer.encode(p) for p in prompts])
    with without_onednn():  # as the notebook: PyTorch's own kernels, not oneDNN's
        cmp = compare_eager_static(model, idx, 200, buckets=(64, 128, 256, 1024))
    assert cmp["max_logit_diff"] > 0
    diffs = cmp["max_logit_diff_per_step"]
    assert all(f["margin"] <= 2 * diffs[f["step"]] for f in cmp["flips"])
