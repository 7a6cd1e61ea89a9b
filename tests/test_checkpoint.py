"""Weights on disk: safetensors with the config in its metadata, bf16, checked by sha256."""

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tinyllm import checkpoint, load, load_pretrained, save
from tinyllm.checkpoint import card_sha256, sha256


def test_save_load_round_trip(toy_model, tmp_path):
    path = tmp_path / "toy.safetensors"
    digest = save(toy_model, path, extra={"val_loss": 1.25})
    assert digest == sha256(path) and len(digest) == 64
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        assert json.loads(meta["config"]) == toy_model.cfg.to_dict()
        assert json.loads(meta["val_loss"]) == 1.25
        assert all(f.get_tensor(k).dtype == torch.bfloat16 for k in f.keys())
    loaded = load(path, expected_sha256=digest)
    assert loaded.cfg == toy_model.cfg
    assert not loaded.training
    assert next(loaded.parameters()).dtype == torch.float32
    state = toy_model.state_dict()
    assert set(loaded.state_dict()) == set(state)
    for name, t in loaded.state_dict().items():
        # stored in bf16, loaded as fp32: exactly the bf16-rounded weights
        assert torch.equal(t, state[name].to(torch.bfloat16).float()), name
    # bf16 keeps ~3 significant digits: the logits move a little, not a lot
    idx = torch.randint(0, 256, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(loaded(idx)[0], toy_model(idx)[0], atol=2e-2, rtol=0)
    # saving the loaded model again gives the same bytes: bf16 → fp32 → bf16 is exact
    assert save(loaded, tmp_path / "again.safetensors") == save(
        toy_model, tmp_path / "b.safetensors"
    )


def test_load_rejects_a_wrong_sha256(toy_model, tmp_path):
    path = tmp_path / "toy.safetensors"
    digest = save(toy_model, path)
    wrong = "0" * 64
    with pytest.raises(ValueError, match=rf"toy.safetensors: sha256 {digest} != expected {wrong}"):
        load(path, expected_sha256=wrong)


def test_load_rejects_a_tensor_of_the_wrong_shape(toy_model, tmp_path):
    path = tmp_path / "bad.safetensors"
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in toy_model.state_dict().items()}
    tensors["blocks.1.attn.wqkv.weight"] = torch.zeros(7, 64, dtype=torch.bfloat16)
    save_file(tensors, str(path), metadata={"config": json.dumps(toy_model.cfg.to_dict())})
    with pytest.raises(
        ValueError,
        match=r"tensor blocks\.1\.attn\.wqkv\.weight has shape \(7, 64\), "
        r"the config needs \(128, 64\)",
    ):
        load(path)


def test_load_rejects_missing_or_unexpected_tensors(toy_model, tmp_path):
    path = tmp_path / "bad.safetensors"
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in toy_model.state_dict().items()}
    del tensors["norm.weight"]
    tensors["extra.weight"] = torch.zeros(3)
    save_file(tensors, str(path), metadata={"config": json.dumps(toy_model.cfg.to_dict())})
    with pytest.raises(
        ValueError, match=r"missing tensors \['norm.weight'\], unexpected \['extra.weight'\]"
    ):
        load(path)


def test_load_rejects_a_file_without_config_or_no_file(toy_model, tmp_path):
    path = tmp_path / "noconf.safetensors"
    save_file({k: v.contiguous() for k, v in toy_model.state_dict().items()}, str(path))
    with pytest.raises(ValueError, match="no model config in its metadata"):
        load(path)
    with pytest.raises(ValueError, match="no weights file at"):
        load(tmp_path / "missing.safetensors")


def test_shipped_weights_match_the_model_card():
    assert sha256(checkpoint.PRETRAINED) == card_sha256()
    model = load_pretrained(device="cpu")
    assert not model.training
    assert model.cfg.to_dict()["d_model"] == 256
    assert next(model.parameters()).device.type == "cpu"


def test_load_pretrained_checks_the_card_sha256(toy_model, tmp_path, monkeypatch):
    # another valid weights file in the shipped file's place: its sha256 is not the card's
    other = tmp_path / "tiny.safetensors"
    save(toy_model, other)
    monkeypatch.setattr(checkpoint, "PRETRAINED", other)
    with pytest.raises(ValueError, match=rf"sha256 {sha256(other)} != expected {card_sha256()}"):
        load_pretrained(device="cpu")
    # the shipped file with a card that records another sha256
    monkeypatch.undo()
    monkeypatch.setattr(checkpoint, "card_sha256", lambda: "f" * 64)
    with pytest.raises(ValueError, match="!= expected f{64}"):
        load_pretrained(device="cpu")


def test_a_changed_byte_is_caught(tmp_path):
    copy = tmp_path / "tiny.safetensors"
    shutil.copy(checkpoint.PRETRAINED, copy)
    data = bytearray(copy.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    copy.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256"):
        load(copy, expected_sha256=card_sha256())


def test_card_sha256_needs_a_sha256_row(tmp_path):
    card = tmp_path / "MODEL_CARD.md"
    card.write_text("| field | value |\n| --- | --- |\n| weights | x |\n")
    with pytest.raises(ValueError, match="records no sha256"):
        card_sha256(card)
