"""tinyllm.course.setup_check: the environment report of notebook 00 and its exercise checkers.

A checker must accept the right answer, reject every wrong one with a hint (never a
traceback), and say "[OK]" only when it returns True.
"""

import importlib
import re

import pytest
import torch

from tinyllm import Tokenizer, load_pretrained
from tinyllm.course import setup_check
from tinyllm.course.setup_check import (
    NO_GPU, check_environment, check_param_split, check_token_count, check_weights,
    print_report,
)

TEXT = "naïve café: 3 € 🐍"
ATTN, FFN = 196_608, 589_824  # one block of the shipped "tiny" model


# --- the environment report ------------------------------------------------------------------

def test_check_environment_items():
    items = check_environment()
    names = [name for name, _, _ in items]
    assert names == ["Python", "torch", "device", "ipywidgets", "matplotlib", "safetensors",
                     "weights"]
    for name, ok, detail in items:
        assert isinstance(name, str) and isinstance(ok, bool) and isinstance(detail, str)
        assert detail, name
    # this test suite runs in the course environment: every item passes here
    assert all(ok for _, ok, _ in items), items


def test_weights_match_the_model_card():
    name, ok, detail = check_weights()
    assert (name, ok) == ("weights", True)
    assert "matches MODEL_CARD.md" in detail


def test_weights_mismatch_fails(tmp_path):
    fake = tmp_path / "tiny.safetensors"
    fake.write_bytes(b"not the shipped weights")
    name, ok, detail = check_weights(path=fake)
    assert not ok and "differs from the model card" in detail
    name, ok, detail = check_weights(path=tmp_path / "absent.safetensors")
    assert not ok and "missing" in detail


def test_no_gpu_is_ok(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert setup_check.check_device() == ("device", True, NO_GPU)


def test_missing_package_fails(monkeypatch):
    real = importlib.import_module

    def fake_import(name, *args):
        if name == "ipywidgets":
            raise ImportError("No module named 'ipywidgets'")
        return real(name, *args)

    monkeypatch.setattr(setup_check.importlib, "import_module", fake_import)
    name, ok, detail = setup_check.check_package("ipywidgets")
    assert (name, ok) == ("ipywidgets", False)
    assert "make lab" in detail


def test_old_python_and_torch_fail(monkeypatch):
    assert setup_check.major_minor("2.13.0+cu130") == (2, 13)
    assert setup_check.major_minor("2.4.1") < setup_check.MIN_TORCH
    monkeypatch.setattr(torch, "__version__", "2.4.1+cpu")
    assert setup_check.check_torch()[1] is False


def test_print_report(capsys):
    print_report([("Python", True, "3.11.7 (3.10 or newer needed)"),
                  ("weights", False, "tiny.safetensors is missing")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[OK]") and "Python" in lines[0]
    assert lines[1].startswith("[FAIL]") and "weights" in lines[1]
    assert "1 of 2 checks failed" in lines[-1]


def test_report_versions_are_masked_by_the_sanitizer(capsys):
    """Every version the report prints follows its name, the form nbval_sanitize.cfg masks."""
    print_report(check_environment())
    out = capsys.readouterr().out
    for name in ("Python", "torch", "ipywidgets", "matplotlib", "safetensors"):
        assert re.search(rf"\b{name}\s+\d+\.\d+", out), name


# --- exercise 1: token count -----------------------------------------------------------------

def test_token_count_right(capsys):
    n = len(Tokenizer().encode(TEXT))
    assert n == 24
    assert check_token_count(n, TEXT) is True
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize("answer", [None, len(TEXT), 23, 25, 0, -1, "24", 24.0, True])
def test_token_count_wrong(answer, capsys):
    assert check_token_count(answer, TEXT) is False
    out = capsys.readouterr().out
    assert out.startswith("[hint]") and "[OK]" not in out


def test_token_count_characters_hint(capsys):
    check_token_count(len(TEXT), TEXT)
    assert "number of characters" in capsys.readouterr().out


def test_token_count_ascii():
    assert check_token_count(5, "hello") is True


# --- exercise 2: attention vs feed-forward ---------------------------------------------------

def test_param_split_matches_the_model():
    block = load_pretrained(device="cpu").blocks[0]
    assert setup_check.param_split() == (
        sum(p.numel() for p in block.attn.parameters()),
        sum(p.numel() for p in block.ffn.parameters())) == (ATTN, FFN)


@pytest.mark.parametrize("answer", [(ATTN, FFN), [ATTN, FFN]])
def test_param_split_right(answer, capsys):
    assert check_param_split(answer) is True
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize("answer, hint", [
    (None, "Not answered yet"),
    (ATTN, "pair of ints"),
    ((ATTN, FFN, 0), "pair of ints"),
    ((ATTN, float(FFN)), "pair of ints"),
    ((FFN, ATTN), "swapped"),
    ((4 * 256 * 256, FFN), "n_kv_heads"),
    ((ATTN, 2 * 256 * 768), "three matrices"),
    ((ATTN + 256, FFN), "count only block.attn"),
    ((ATTN, FFN + 256), "count only block.ffn"),
    ((ATTN, 1), "attention count is right"),
    ((1, FFN), "feed-forward count is right"),
])
def test_param_split_wrong(answer, hint, capsys):
    assert check_param_split(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("[hint]") and hint in out and "[OK]" not in out
