"""Training end to end: a few steps of the toy preset on the CPU, as a subprocess."""

import json
import math
import subprocess
import sys

from tinyllm import load
from tinyllm.checkpoint import PRETRAINED, sha256


def test_toy_training_lowers_the_loss(tmp_path):
    out, log, card = tmp_path / "toy.safetensors", tmp_path / "log.json", tmp_path / "card.md"
    shipped = sha256(PRETRAINED)
    cmd = [
        sys.executable,
        "-m",
        "tinyllm.train",
        "--preset",
        "toy",
        "--steps",
        "30",
        "--batch",
        "8",
        "--seq-len",
        "64",
        "--eval-every",
        "5",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--log",
        str(log),
        "--card",
        str(card),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(log.read_text())
    hist = info["history"]
    assert hist["step"] == [0, 5, 10, 15, 20, 25, 29]
    train, val = hist["train_loss"], hist["val_loss"]
    # untrained, the model is near uniform over 258 ids: ln 258 = 5.55 nats
    assert abs(train[0] - math.log(258)) < 0.3
    # 30 steps learn the byte statistics: both losses fall by well over a nat
    assert train[-1] < train[0] - 1.0
    assert val[-1] < val[0] - 1.0
    assert min(val) == val[-1] or min(val) < val[0] - 1.0
    assert info["val_loss"] == round(min(val), 4)
    assert info["preset"] == "toy" and info["steps"] == 30
    # the checkpoint written is the one the log describes, and it loads
    assert info["sha256"] == sha256(out)
    model = load(out, expected_sha256=info["sha256"])
    assert model.cfg.to_dict() == info["config"]
    assert info["sha256"] in card.read_text()
    # a toy run never touches the shipped weights
    assert sha256(PRETRAINED) == shipped
