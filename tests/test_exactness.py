"""tinyllm.lab.exactness: what SDPA returns for a fully masked row (notebooks 02 and 06).
compare_replay and compare_eager_static are exercised by the GPU tests and notebook 05."""

import json

import pytest
import torch
from conftest import recorded_results
from torch.nn.attention import SDPBackend

from tinyllm.lab import results
from tinyllm.lab.exactness import fully_masked_row, what_came_back


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
