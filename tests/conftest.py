"""Shared fixtures for the unit tests.

- Tests marked `cuda` are skipped, with a reason, where torch sees no CUDA device.
- `toy_model`: the "toy" preset with fixed random weights (seed 1234), for tests of
  shapes, masks and numerics that need no trained model. Session scope: build it once.
- `shipped_model`: the trained model in tinyllm/weights, on the CPU, for tests whose
  behaviour depends on real text (greedy continuations, EOS, the engine).
- Every test runs with the checkers' time limits a tenth as long (harness.TIME_SCALE).
- Every test starts from `torch.manual_seed(0)`, so a test's random tensors do not depend
  on which tests ran before it.
- `assert_hint(check, answer, capsys, *needles)`: a checker's answer to a wrong answer is one
  `[HINT]` line (holding each needle), never a traceback and never `[OK]`; `WRONG_VALUES`
  and `returning(value)` are the wrong types every checker must answer with a hint, and
  `JUNK_VALUES` worse ones (numpy arrays, tensors without data, objects whose repr, len,
  iteration, == or int() raise); `never_returns` is a function that never returns.
- `recorded`: the shipped recording results/h200.json, a fresh copy for each test to read or
  change, so that tests of figures, explorers and checkers run on the real schema;
  `recorded_results()` gives the same outside a fixture. `trace`: profiled steps in the
  schema of results/traces/h200.json, small enough to count by hand (test_viz.py checks
  that its keys are the real trace's). `slot_stats`: Engine.stats of 3 slots.

Session-scoped models are shared: a test must never change their weights or mode.
"""

import atexit
import copy
import json
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest
import torch

# Hypothesis keeps its examples and the constants it collects in a folder: a temporary one,
# removed at exit, so that the tests write nothing into the repository
if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="hypothesis-")
    atexit.register(shutil.rmtree, os.environ["HYPOTHESIS_STORAGE_DIRECTORY"], True)

from tinyllm import Tokenizer, Transformer, get_config, load_pretrained  # noqa: E402
from tinyllm.course.exercises.harness import Verdict

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


@pytest.fixture(autouse=True)
def _short_time_limits(monkeypatch):
    """The checkers' time limits, a tenth as long: a learner's function that never returns
    gets its hint in a tenth of the time (the hint still names the limit the learner meets)."""
    from tinyllm.course.exercises import harness

    monkeypatch.setattr(harness, "TIME_SCALE", 0.1)


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


def peer_results() -> dict:
    """A made-up recording in the schema of the peers section of lab/bench.py (fusion,
    host_breakdown, cost_model, position_sweep, headline; a diet is peer_diet()), small
    enough to check by hand. Its cost model is fitted by the bench's own functions, so a
    test reads the same points and fit a real recording would hold."""
    from tinyllm.lab import bench, peers

    def row(name, median, kernels, skips=0, setup=1.0):
        step = {"median": median, "min": median * 0.9, "max": median * 1.2, "n": 5}
        return {
            "name": name,
            "step_us": step,
            "cpu_us": median / 2,
            "kernels": kernels,
            "kernel_us": kernels * 1.5,
            "setup_s": setup,
            "cudagraph_skips": skips,
        }

    rows = [
        row("eager", 1300.0, 70, setup=0.0),
        row("static", 1600.0, 85, setup=0.02),
        row("graph", 180.0, 85, setup=0.1),
        row("fused kernels, no graph", 1000.0, 53),
        row("fused kernels in bucketed graphs", 120.0, 53, setup=9.0),
        row("fused kernels in bucketed graphs, Inductor defaults", 130.0, 53),
        row("reduce-overhead, first try", 990.0, 53, skips=1),
        row("gpt-fast", 200.0, 70, setup=14.0),
        row("gpt-fast, static tables", 190.0, 70),
        row("gpt-fast, forward only, static tables", 160.0, 61),
        row("gpt-fast, forward only, static tables, triton.enable_pdl=True", 155.0, 61),
    ]
    res = {
        "provenance": {
            "gpu": "NVIDIA H200",
            "torch": "2.13.0",
            "date": "2026-12-01",
            "commit": "abcdef0",
        },
        "operating_point": {"max_len": 1024, "buckets": [128, 256, 512, 1024]},
        "bandwidth": {"floor_us": 1.5},
        "engine": {"speedup": 3.0},
        "fusion": {
            "batch": 1,
            "positions": [32, 75],
            "window": 128,
            "rows": rows,
            "compile": {"dynamic": False},
            "gpt_fast_extra": {"triton.enable_pdl": True},
        },
        "host_breakdown": {
            "reduce-overhead, first try": {
                "host_step_us": 1000.0,
                "gpu_kernel_us": 100.0,
                "host_events_us": {"TorchDynamo Cache Lookup": 40.0, "aten::copy_": 300.0},
            },
            "gpt-fast": {
                "host_step_us": 800.0,
                "gpu_kernel_us": 110.0,
                "host_events_us": {
                    "TorchDynamo Cache Lookup": 25.0,
                    "aten::_foreach_copy_": 400.0,
                    "cudaGraphLaunch": 80.0,
                    "aten::copy_": 20.0,
                },
            },
            "gpt-fast, static tables": {
                "host_step_us": 300.0,
                "gpu_kernel_us": 100.0,
                "host_events_us": {
                    "TorchDynamo Cache Lookup": 25.0,
                    "aten::_foreach_copy_": 30.0,
                    "cudaGraphLaunch": 70.0,
                },
            },
        },
        "position_sweep": {
            "positions": [32, 48, 64, 80],
            "bin_size": 16,
            "graph_us": [180.0, 181.0, 250.0, 251.0],
            "fused_us": [120.0, 121.0, 170.0, 171.0],
            "gpt-fast_us": [160.0, 160.0, 160.0, 160.0],
        },
    }
    diet = peer_diet()
    res["cost_model"] = peers.cost_model(rows, diet)
    res["headline"] = bench.headline(res)
    return res


def peer_diet() -> dict:
    """A made-up kernel diet (results/<gpu>_diet.json): three stages, batches 1 and 8."""

    def cell(median, kernels):
        step = {"median": median, "min": median - 1, "max": median + 2, "n": 5}
        return {"step_us": step, "kernels": kernels, "kernel_us": kernels * 1.5}

    stages = []
    for name, kernels, us in (("s0", 273, 440.0), ("s1", 204, 350.0), ("s2", 85, 180.0)):
        methods = (("eager", 5), ("static", 6), ("graph", 1))
        batch = {b: {m: cell(us * f, kernels) for m, f in methods} for b in ("1", "8")}
        stages.append({"stage": name, "commit": "0000000", "batch": batch})
    return {"stages": stages}


# --- the exercises' checkers -----------------------------------------------------------------

WRONG_VALUES = {  # what a learner passes, or what their function returns, instead of the answer
    "None": None,
    "str": "128",
    "int": 5,
    "dict": {0: 1, 1: 2},
    "flat list": [0, 1, 2],
}


class Hostile:
    """A learner's object that fails at everything a checker might try on it."""

    def _fail(self, *args):
        raise RuntimeError("hostile")

    __repr__ = __str__ = __len__ = __iter__ = __eq__ = __bool__ = _fail
    __int__ = __float__ = __index__ = __hash__ = __getitem__ = _fail


class HostileList(list):
    """A list whose len() and iteration raise: it passes isinstance(x, list)."""

    def _fail(self, *args):
        raise RuntimeError("hostile")

    __len__ = __iter__ = __repr__ = __getitem__ = _fail


def _junk_values() -> dict:
    import numpy as np

    return {
        "hostile": Hostile(),
        "hostile list": HostileList([1, 2]),
        "numpy array": np.array([1, 2]),
        "numpy letters": np.array(["a", "b"]),
        "float tensor": torch.tensor([0.5, 1.5]),
        "meta tensor": torch.empty((), dtype=torch.int64, device="meta"),
        "nan": float("nan"),
        "bool": True,
    }


JUNK_VALUES = _junk_values()


def never_returns(*args):
    """A learner's function that does not return for an hour, without a loop (the checker's
    time limit must stop it)."""
    import time

    time.sleep(3600)


def returning(value):
    """A learner's function that returns `value` whatever it is given."""
    return lambda *args: value


def raising(*args):
    """A learner's function that crashes."""
    return 1 / 0


def passed(verdict) -> bool:
    """A checker's answer was [OK]: a Verdict that is true (not a bare True, not None)."""
    return isinstance(verdict, Verdict) and verdict.passed


def failed(verdict) -> bool:
    """A checker's answer was a hint: a Verdict that is false (not a bare False, not None)."""
    return isinstance(verdict, Verdict) and not verdict.passed


def assert_hint(check, answer, capsys, *needles) -> str:
    """check(answer) prints one [HINT] line that holds every needle, no traceback and no
    [OK], and returns False. Returns the line."""
    result = check(answer)
    out = capsys.readouterr().out
    assert failed(result), f"{out!r}: the checker returned {result!r}"
    assert out.startswith("[HINT] ") and out.count("\n") == 1, out
    assert "Traceback" not in out and "[OK]" not in out, out
    for needle in needles:
        assert needle in out, f"{needle!r} not in {out!r}"
    return out


def assert_ok(check, answer, capsys) -> None:
    result = check(answer)
    out = capsys.readouterr().out
    assert passed(result) and out.startswith("[OK] ") and out.count("\n") == 1, out


# Both engines' fault tables serve these (tests/test_engine.py, tests/test_serve.py), on the
# toy model: a faulted run's tokens are compared with an uninterrupted run's on the same model,
# so no trained weights are needed. FAULT_EOS is a byte the toy model's uninterrupted run emits
# in some of these requests but not all (each fixture asserts it), so finishing at EOS and at
# max_new_tokens both happen.
FAULT_EOS = 38
FAULT_REQUESTS = [  # (prompt start, length, max_new_tokens, sampling): greedy and seeded
    (1000, 7, 12, {}),
    (5000, 11, 5, {"temperature": 0.8, "top_k": 20, "seed": 1}),
    (9000, 5, 9, {}),
    (13000, 9, 14, {"temperature": 1.2, "seed": 2}),
    (17000, 6, 1, {}),
    (21000, 8, 7, {"temperature": 0.7, "seed": 3}),
]


def assert_some_finish_by_eos(out: dict, rids: list[int]) -> None:
    """An uninterrupted run of FAULT_REQUESTS with eos_id=FAULT_EOS: some requests end at EOS,
    before their max_new_tokens, and some of several tokens run to max_new_tokens without it."""
    news = [m for _, _, m, _ in FAULT_REQUESTS]
    by_eos = [len(out[r]) < m and out[r][-1] == FAULT_EOS for r, m in zip(rids, news)]
    to_length = [len(out[r]) == m > 1 and FAULT_EOS not in out[r] for r, m in zip(rids, news)]
    assert any(by_eos) and any(to_length), (by_eos, to_length)
