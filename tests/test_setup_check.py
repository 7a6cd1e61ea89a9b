"""tinyllm.course.setup_check: the environment report of notebook 00."""

import importlib
import re

import torch

from tinyllm.course import setup_check
from tinyllm.course.setup_check import (
    NO_GPU,
    environment_report,
    print_report,
    weights_item,
)

# --- the environment report ------------------------------------------------------------------


def test_check_environment_items():
    items = environment_report()
    names = [name for name, _, _ in items]
    assert names == [
        "Python",
        "torch",
        "device",
        "ipywidgets",
        "matplotlib",
        "safetensors",
        "weights",
    ]
    for name, ok, detail in items:
        assert isinstance(name, str) and isinstance(ok, bool) and isinstance(detail, str)
        assert detail, name
    # this test suite runs in the course environment: every item passes here
    assert all(ok for _, ok, _ in items), items


def test_weights_match_the_model_card():
    name, ok, detail = weights_item()
    assert (name, ok) == ("weights", True)
    assert "matches MODEL_CARD.md" in detail


def test_weights_mismatch_fails(tmp_path):
    fake = tmp_path / "tiny.safetensors"
    fake.write_bytes(b"not the shipped weights")
    name, ok, detail = weights_item(path=fake)
    assert not ok and "differs from the model card" in detail
    name, ok, detail = weights_item(path=tmp_path / "absent.safetensors")
    assert not ok and "missing" in detail


def test_no_gpu_is_ok(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert setup_check.device_item() == ("device", True, NO_GPU)


def test_missing_package_fails(monkeypatch):
    real = importlib.import_module

    def fake_import(name, *args):
        if name == "ipywidgets":
            raise ImportError("No module named 'ipywidgets'")
        return real(name, *args)

    monkeypatch.setattr(setup_check.importlib, "import_module", fake_import)
    name, ok, detail = setup_check.package_item("ipywidgets")
    assert (name, ok) == ("ipywidgets", False)
    assert "make lab" in detail


def test_old_python_and_torch_fail(monkeypatch):
    assert setup_check.major_minor("2.13.0+cu130") == (2, 13)
    assert setup_check.major_minor("2.4.1") < setup_check.MIN_TORCH
    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    assert setup_check.torch_item()[1] is False


def test_print_report(capsys):
    print_report(
        [
            ("Python", True, "3.11.7 (3.10 or newer needed)"),
            ("weights", False, "tiny.safetensors is missing"),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[OK]") and "Python" in lines[0]
    assert lines[1].startswith("[FAIL]") and "weights" in lines[1]
    assert "1 of 2 checks failed" in lines[-1]


def test_report_versions_are_masked_by_the_sanitizer(capsys):
    """Every version the report prints follows its name, the form nbval_sanitize.cfg masks."""
    print_report(environment_report())
    out = capsys.readouterr().out
    for name in ("Python", "torch", "ipywidgets", "matplotlib", "safetensors"):
        assert re.search(rf"\b{name}\s+\d+\.\d+", out), name


def test_the_report_runs_from_a_terminal():
    """`python -m tinyllm.course.setup_check`, the command notebook 00 gives, prints the
    report and exits 0 when every check passes."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "tinyllm.course.setup_check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("[OK]   Python") and "All 7 checks passed" in run.stdout
