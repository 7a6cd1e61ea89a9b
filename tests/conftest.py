"""Shared fixtures for the unit tests.

- Tests marked `cuda` are skipped, with a reason, where torch sees no CUDA device.
- `toy_model`: the "toy" preset with fixed random weights (seed 1234), for tests of
  shapes, masks and numerics that need no trained model. Session scope: build it once.
- `shipped_model`: the trained model in tinyllm/weights, on the CPU, for tests whose
  behaviour depends on real text (greedy continuations, EOS, the engine).
- Every test starts from `torch.manual_seed(0)`, so a test's random tensors do not depend
  on which tests ran before it.

Session-scoped models are shared: a test must never change their weights or mode.
"""

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
