"""Shared fixtures for the unit tests.

- Tests marked `cuda` are skipped, with a reason, where torch sees no CUDA device.
- `toy_model`: the "toy" preset with fixed random weights (seed 1234), for tests of
  shapes, masks and numerics that need no trained model. Session scope: build it once.
- `shipped_model`: the trained model in tinyllm/weights, on the CPU, for tests whose
  behaviour depends on real text (greedy continuations, EOS, the engine).
- Every test starts from `torch.manual_seed(0)`, so a test's random tensors do not depend
  on which tests ran before it.
- `assert_hint(check, answer, capsys, *needles)`: a checker's answer to a wrong answer is one
  `[HINT]` line (holding each needle), never a traceback and never `[OK]`; `WRONG_VALUES`
  and `returning(value)` are the wrong types every checker must answer with a hint.
- `recorded`: the shipped recording results/h200.json, a fresh copy for each test to read or
  change, so that tests of figures, explorers and checkers run on the real schema;
  `recorded_results()` gives the same outside a fixture. `trace`: profiled steps in the
  schema of results/traces/h200.json, small enough to count by hand (test_viz.py checks
  that its keys are the real trace's). `slot_stats`: Engine.stats of 3 slots.

Session-scoped models are shared: a test must never change their weights or mode.
"""

import copy
import json
from functools import cache
from pathlib import Path

import pytest
import torch

from tinyllm import Tokenizer, Transformer, get_config, load_pretrained

TOY_SEED = 1234


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_model():
    torch.manual_seed(TOY_SEED)
    return Transformer(get_config("toy")).eval()


@pytest.fixture(scope="session")
def shipped_model():
    return load_pretrained(device="cpu")


@pytest.fixture(scope="session")
def tokenizer():
    return Tokenizer()


@pytest.fixture(scope="session")
def doc_ids(tokenizer):
    """Python's help() text (the shipped model's training data) as byte ids: real text
    to cut prompts from."""
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    return tokenizer.encode("".join(topics[k] for k in sorted(topics)))


RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"


@cache
def _shipped() -> dict:
    return json.loads((RESULTS_DIR / "h200.json").read_text())


def recorded_results() -> dict:
    """A copy of the shipped recording, results/h200.json."""
    return copy.deepcopy(_shipped())


@pytest.fixture
def recorded() -> dict:
    return recorded_results()


def small_trace() -> dict:
    """Two profiled steps per method at batch 1 and 64, six kernels each, in the schema of
    results/traces/h200.json: eager kernels 5 µs apart, graph kernels back to back."""

    def steps(gap, n=6):
        events, t = [], 0.0
        for step in range(2):
            for k in range(n):
                for kind, start, dur in (("cpu", t, 1.0), ("gpu", t + 0.5, 3.0)):
                    events.append({"step": step, "name": f"k{k}", "start_us": start,
                                   "dur_us": dur, "kind": kind})  # fmt: skip
                t += 3.0 + gap
        return events

    batches = {str(b): {"eager": steps(gap=5.0), "graph": steps(gap=0.0)} for b in (1, 64)}
    return {"provenance": _shipped()["provenance"], "batch": batches}


@pytest.fixture
def trace() -> dict:
    return small_trace()


def slot_stats() -> list[dict]:
    """Engine.stats of 3 slots: request 0 leaves after step 1, request 3 takes its slot."""
    slots = [[0, 1, 2], [0, 1, 2], [3, 1, None], [3, None, None]]
    return [
        {"step": i, "slots": s, "window": 128, "n_active": 3 - s.count(None), "step_s": 1e-3}
        for i, s in enumerate(slots)
    ]


# --- the exercises' checkers -----------------------------------------------------------------

WRONG_VALUES = {  # what a learner passes, or what their function returns, instead of the answer
    "None": None,
    "str": "128",
    "int": 5,
    "dict": {0: 1, 1: 2},
    "flat list": [0, 1, 2],
}


def returning(value):
    """A learner's function that returns `value` whatever it is given."""
    return lambda *args: value


def raising(*args):
    """A learner's function that crashes."""
    return 1 / 0


def assert_hint(check, answer, capsys, *needles) -> str:
    """check(answer) prints one [HINT] line that holds every needle, no traceback and no
    [OK], and returns False. Returns the line."""
    result = check(answer)
    out = capsys.readouterr().out
    assert result is False, f"{out!r}: the checker returned {result!r}"
    assert out.startswith("[HINT] ") and out.count("\n") == 1, out
    assert "Traceback" not in out and "[OK]" not in out, out
    for needle in needles:
        assert needle in out, f"{needle!r} not in {out!r}"
    return out


def assert_ok(check, answer, capsys) -> None:
    result = check(answer)
    out = capsys.readouterr().out
    assert result is True and out.startswith("[OK] ") and out.count("\n") == 1, out
