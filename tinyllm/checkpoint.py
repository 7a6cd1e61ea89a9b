"""Weights on disk: safetensors only (a pickle can run code when loaded; safetensors cannot).

Tensors are stored in bf16 (half the bytes) and loaded in the compute dtype of the device
(generation.compute_dtype: bf16 on CUDA, fp32 on the CPU); the model's config travels
in the file's metadata, so a file is all it takes to rebuild the model.
"""

import hashlib
import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tinyllm.config import ModelConfig
from tinyllm.generation import compute_dtype
from tinyllm.model import Transformer

WEIGHTS_DIR = Path(__file__).parent / "weights"
PRETRAINED = WEIGHTS_DIR / "tiny.safetensors"
MODEL_CARD = WEIGHTS_DIR / "MODEL_CARD.md"


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save(model: Transformer, path, extra: dict | None = None) -> str:
    """Write the model's weights (bf16) and config; returns the file's sha256."""
    tensors = {
        k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in model.state_dict().items()
    }
    meta = {"config": json.dumps(model.cfg.to_dict())}
    meta.update({k: json.dumps(v) for k, v in (extra or {}).items()})
    save_file(tensors, str(path), metadata=meta)
    return sha256(path)


def load(path, expected_sha256: str | None = None, device=None) -> Transformer:
    """Rebuild a Transformer from a safetensors file, checking its sha256 first if given,
    with its parameters (and RoPE tables) in generation.compute_dtype(device): bf16 on
    CUDA, as stored, and fp32 on the CPU."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no weights file at {path}")
    if expected_sha256 is not None:
        actual = sha256(path)
        if actual != expected_sha256:
            raise ValueError(f"{path.name}: sha256 {actual} != expected {expected_sha256}")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if "config" not in meta:
            raise ValueError(f"{path.name} has no model config in its metadata")
        model = Transformer(ModelConfig(**json.loads(meta["config"])))
        expected = model.state_dict()
        names = set(f.keys())
        if names != set(expected):
            missing, extra = sorted(set(expected) - names), sorted(names - set(expected))
            raise ValueError(f"{path.name}: missing tensors {missing}, unexpected {extra}")
        state = {}
        for name in expected:
            t = f.get_tensor(name)
            if t.shape != expected[name].shape:
                raise ValueError(
                    f"{path.name}: tensor {name} has shape {tuple(t.shape)}, "
                    f"the config needs {tuple(expected[name].shape)}"
                )
            state[name] = t.float()
    model.load_state_dict(state)
    device = torch.device(device or "cpu")
    model = model.to(device=device, dtype=compute_dtype(device))  # the dtype it computes in
    return model.eval().requires_grad_(False)  # for inference


def card_sha256(card=None) -> str:
    """The sha256 recorded in the model card (its `| sha256 | ... |` row)."""
    card = card or MODEL_CARD
    m = re.search(r"\|\s*sha256\s*\|\s*`?([0-9a-f]{64})`?\s*\|", Path(card).read_text())
    if not m:
        raise ValueError(f"{card} records no sha256")
    return m.group(1)


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU (every lesson runs on both)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_pretrained(device=None) -> Transformer:
    """The course's shipped model, checked against its model card, in eval mode."""
    return load(PRETRAINED, expected_sha256=card_sha256(), device=device or default_device())
