"""Weights on disk: safetensors with the config in its metadata, bf16, checked by sha256.

A weights file is untrusted: every bad file below is refused with a ValueError that names
it, before anything the size of the model is allocated."""

import copy
import json
import os
import re
import shutil
import time

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tinyllm import (
    Limits,
    Transformer,
    checkpoint,
    complete,
    get_config,
    load,
    load_pretrained,
    save,
)
from tinyllm.checkpoint import card_sha256, sha256


def bf16_tensors(model, dtype=torch.bfloat16) -> dict:
    return {k: v.to(dtype, copy=True).contiguous() for k, v in model.state_dict().items()}


def write(path, tensors: dict, config) -> str:
    """A weights file as save() never writes one: config a dict, or the raw metadata string."""
    config = config if isinstance(config, str) else json.dumps(config)
    save_file(tensors, str(path), metadata={"config": config})
    return path


def write_raw(path, header: dict, data: bytes = b"") -> str:
    """A file in the safetensors layout, by hand: header length (8 bytes), JSON header, data."""
    head = json.dumps(header).encode()
    path.write_bytes(len(head).to_bytes(8, "little") + head + data)
    return path


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
    tensors = bf16_tensors(toy_model)
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
    tensors = bf16_tensors(toy_model)
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


def test_the_sha256_is_checked_before_the_file_is_read(tmp_path):
    """With a sha256 given, a file that is not the expected one is refused as such, whatever
    else is wrong with it: nothing of it is parsed."""
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(checkpoint.PRETRAINED.read_bytes()[:1000])
    with pytest.raises(ValueError, match=rf"tiny.safetensors: sha256 {sha256(path)} != expected"):
        load(path, expected_sha256=card_sha256())


def test_card_sha256_needs_a_sha256_row(tmp_path):
    card = tmp_path / "MODEL_CARD.md"
    card.write_text("| field | value |\n| --- | --- |\n| weights | x |\n")
    with pytest.raises(ValueError, match="records no sha256"):
        card_sha256(card)


def test_the_shipped_model_gives_the_tokens_of_its_model_card():
    """The checked loader changes nothing: the weights are those in the file, bit for bit,
    and greedy decoding continues as the model card recorded it."""
    model = load_pretrained(device="cpu")
    stored = load_file(str(checkpoint.PRETRAINED))
    for name, t in model.state_dict().items():
        assert t.dtype == torch.float32 and torch.equal(t, stored[name].float()), name
    card_text = re.search(r"```\n(.*?)\n```", checkpoint.MODEL_CARD.read_text(), re.S).group(1)
    text = complete(model, ["The for statement"], max_new_tokens=60)[0]
    assert len(text) == 60 and card_text.startswith(text)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_fp16_and_fp32_files_load_too(toy_model, tmp_path, dtype):
    path = write(
        tmp_path / "w.safetensors", bf16_tensors(toy_model, dtype), toy_model.cfg.to_dict()
    )
    loaded = load(path)
    for name, t in loaded.state_dict().items():
        assert torch.equal(t, toy_model.state_dict()[name].to(dtype).float()), name


@pytest.mark.parametrize("bad", ["abc", 123, "g" * 64, "0" * 63, b"0" * 64])
def test_load_checks_expected_sha256_is_a_sha256(toy_model, tmp_path, bad):
    path = tmp_path / "toy.safetensors"
    save(toy_model, path)
    with pytest.raises(
        ValueError, match=rf"expected_sha256 must be 64 hex digits, got {re.escape(repr(bad))}"
    ):
        load(path, expected_sha256=bad)


def test_load_accepts_an_upper_case_sha256(toy_model, tmp_path):
    path = tmp_path / "toy.safetensors"
    digest = save(toy_model, path)
    assert load(path, expected_sha256=digest.upper()).cfg == toy_model.cfg


def test_load_checks_the_device_before_reading(tmp_path):
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(ValueError, match=r"device 'gpu' is not a torch device, e.g. 'cpu'"):
        load(missing, device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device cuda: torch sees no CUDA device"):
            load(missing, device="cuda")


# --- files that are not what they claim to be ----------------------------------------------


@pytest.mark.parametrize(
    "keep, message",
    [
        (0, r"t.safetensors holds 0 bytes: too short for a safetensors file"),
        (5, r"t.safetensors holds 5 bytes: too short"),
        (
            100,
            r"t.safetensors is not a safetensors file, or is truncated: its first 8 bytes "
            r"announce a header of \d+ bytes, 92 follow$",
        ),
        (0.5, r"t.safetensors is not a valid safetensors file: .*"),
        (-1, r"t.safetensors is not a valid safetensors file: .*"),
    ],
)
def test_a_truncated_file_is_refused(tmp_path, keep, message):
    data = checkpoint.PRETRAINED.read_bytes()
    keep = int(len(data) * keep) if isinstance(keep, float) else keep
    path = tmp_path / "t.safetensors"
    path.write_bytes(data[:keep])
    with pytest.raises(ValueError, match=message):
        load(path)


@pytest.mark.parametrize("zipfile", [True, False])
def test_a_renamed_pickle_is_refused_without_unpickling(toy_model, tmp_path, zipfile):
    path = tmp_path / "model.safetensors"
    torch.save(toy_model.state_dict(), path, _use_new_zipfile_serialization=zipfile)
    with pytest.raises(
        ValueError,
        match=r"model.safetensors is not a safetensors file, or is truncated: .*; it looks "
        r"like a pickle \(torch.save\), which tinyllm never loads",
    ):
        load(path)


def test_a_file_of_other_bytes_is_refused(tmp_path):
    text = tmp_path / "notes.safetensors"
    text.write_text("these are not weights\n")
    with pytest.raises(ValueError, match=r"notes.safetensors is not a safetensors file, or is"):
        load(text)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes((9).to_bytes(8, "little") + b"{not json")
    with pytest.raises(ValueError, match=r"garbage.safetensors is not a valid safetensors file"):
        load(garbage)


# --- a config that is not a ModelConfig ----------------------------------------------------


def toy_config(**changes) -> dict:
    """The toy preset's config, changed: a key given None is left out."""
    d = get_config("toy").to_dict() | changes
    return {k: v for k, v in d.items() if v is not None}


@pytest.mark.parametrize(
    "config, message",
    [
        ("{", r"its config is not valid JSON \(Expecting property name"),
        ("[" * 100_000 + "]" * 100_000, r"its config is not valid JSON \(maximum recursion"),
        ("[1, 2]", r"its config must be a JSON object, got list"),
        ("5", r"its config must be a JSON object, got int"),
        ('"tiny"', r"its config must be a JSON object, got str"),
        (toy_config(dropout=0.1), r"config keys unknown \['dropout'\], missing \[\]"),
        (toy_config(rope_theta=None), r"config keys unknown \[\], missing \['rope_theta'\]"),
        (toy_config(d_model=0), r"config d_model must be an int >= 1, got 0"),
        (toy_config(d_model="64"), r"config d_model must be an int >= 1, got '64'"),
        (toy_config(n_layers=2.0), r"config n_layers must be an int >= 1, got 2.0"),
        (toy_config(rope_theta=0), r"config rope_theta must be a finite number > 1, got 0"),
        (toy_config(n_kv_heads=3), r"config n_heads 4 is not a multiple of n_kv_heads 3"),
    ],
)
def test_a_bad_config_is_refused(toy_model, tmp_path, config, message):
    path = write(tmp_path / "bad.safetensors", bf16_tensors(toy_model), config)
    with pytest.raises(ValueError, match=rf"^bad.safetensors: {message}"):
        load(path)


def test_a_config_of_nan_rope_theta_is_refused(toy_model, tmp_path):
    config = json.dumps(toy_config()).replace("10000.0", "NaN")  # Python's json reads NaN
    path = write(tmp_path / "bad.safetensors", bf16_tensors(toy_model), config)
    with pytest.raises(ValueError, match=r"config rope_theta must be a finite number > 1, got nan"):
        load(path)


# --- huge claims in a small file -----------------------------------------------------------


HUGE_CLAIMS = {  # a config in a file of a few hundred bytes → what refuses it
    "a 10**9-wide model": (
        toy_config(d_model=10**9, n_heads=10**6, n_kv_heads=10**6, ffn_hidden=10**9),
        r"the config asks for parameters [\d,]+ > the course's limit 8,388,608",
    ),
    "a 1.76 GiB model": (
        toy_config(vocab_size=2**17, d_model=2**12, n_heads=2**5, n_kv_heads=2**4),
        r"the config asks for parameters [\d,]+ > the course's limit",
    ),
    "the largest max_seq_len": (
        toy_config(max_seq_len=2**20),
        r"the config asks for max_seq_len 1,048,576 > the course's limit 8,192",
    ),
    "100 layers": (
        toy_config(n_layers=100),
        r"the config asks for n_layers 100 > the course's limit 64",
    ),
}


@pytest.mark.parametrize("claim", HUGE_CLAIMS)
def test_a_small_file_claiming_a_huge_model_is_refused_at_once(tmp_path, monkeypatch, claim):
    """Refused from the header's config, in well under a second, before any model is built
    (not even on meta) and before any tensor is read."""
    config, message = HUGE_CLAIMS[claim]
    path = write(tmp_path / "huge.safetensors", {"norm.weight": torch.zeros(2)}, config)
    assert path.stat().st_size < 400
    monkeypatch.setattr(checkpoint, "Transformer", lambda *a: pytest.fail("a model was built"))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"huge.safetensors: {message}"):
        load(path)
    assert time.perf_counter() - t0 < 0.25


def test_a_header_larger_than_the_limit_is_refused_unread(tmp_path, monkeypatch):
    """A header of tens of thousands of stub tensors (MBs of JSON) is refused from its length
    alone: safetensors would parse all of it before any check could run."""
    header = {f"t{i}": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
              for i in range(60_000)}  # fmt: skip
    path = write_raw(tmp_path / "stubs.safetensors", header, bytes(2 * 60_000))
    assert path.stat().st_size > 2**21
    with monkeypatch.context() as m:
        m.setattr(checkpoint, "safe_open", lambda *a, **k: pytest.fail("the header was parsed"))
        t0 = time.perf_counter()
        with pytest.raises(ValueError, match=r"stubs.safetensors: its header of [\d,]+ bytes "
                           r"is larger than the limit of 1,048,576"):  # fmt: skip
            load(path)
        assert time.perf_counter() - t0 < 0.25
    with pytest.raises(ValueError, match=r"no model config"):  # lifted: read, and refused
        load(path, limits=Limits(header_bytes=2**23))


def test_big_claimed_shapes_are_refused_before_anything_is_allocated(
    toy_model, tmp_path, monkeypatch
):
    """A config within the limits whose embedding alone is 2**21 elements, in a file of toy
    weights: refused from the header, the model only ever built on meta."""
    big = toy_config(vocab_size=2**12, d_model=2**9, n_heads=2**3, n_kv_heads=2**2)
    path = write(tmp_path / "big.safetensors", bf16_tensors(toy_model), big)
    built_on = []

    def spy(cfg, *args):
        built_on.append(torch.get_default_device().type)
        return Transformer(cfg)

    checkpoint.expected_shapes(get_config("toy"))  # the first meta build imports torch._dynamo
    monkeypatch.setattr(checkpoint, "Transformer", spy)
    t0 = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"big.safetensors: tensor tok_emb.weight has shape \(258, 64\), "
        r"the config needs \(4096, 512\)",
    ):
        load(path)
    assert built_on == ["meta"]
    assert time.perf_counter() - t0 < 1.0


def test_a_deep_config_in_a_small_file_is_refused_before_building_layers(toy_model, tmp_path):
    path = write(tmp_path / "deep.safetensors", bf16_tensors(toy_model), toy_config(n_layers=60))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"deep.safetensors: 15 tensors, too few for n_layers 60"):
        load(path)
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize(
    "shape, offsets",
    [
        ([10**9, 64], [0, 2 * 64 * 10**9]),  # 128 GB announced, 16 bytes there
        ([10**9, 64], [0, 16]),  # a shape its offsets do not hold
        ([2**40, 2**40], [0, 16]),  # a size that overflows
    ],
)
def test_a_header_claiming_more_data_than_the_file_holds_is_refused(tmp_path, shape, offsets):
    header = {
        "__metadata__": {"config": json.dumps(toy_config())},
        "tok_emb.weight": {"dtype": "BF16", "shape": shape, "data_offsets": offsets},
    }
    path = write_raw(tmp_path / "liar.safetensors", header, bytes(16))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"liar.safetensors is not a valid safetensors file: "):
        load(path)
    assert time.perf_counter() - t0 < 0.25


# --- weights that are not weights ------------------------------------------------------------


@pytest.mark.parametrize(
    "value, dtype",
    [
        (float("nan"), torch.bfloat16),
        (float("inf"), torch.bfloat16),
        (-float("inf"), torch.float16),
        (float("nan"), torch.float32),
    ],
)
def test_non_finite_weights_are_refused_naming_the_tensor(toy_model, tmp_path, value, dtype):
    tensors = bf16_tensors(toy_model, dtype)
    tensors["blocks.1.ffn.w2.weight"][3, 5] = value
    path = write(tmp_path / "nan.safetensors", tensors, toy_model.cfg.to_dict())
    with pytest.raises(
        ValueError,
        match=r"nan.safetensors: tensor blocks.1.ffn.w2.weight holds 1 non-finite values",
    ):
        load(path)


def test_weights_that_would_overflow_every_forward_are_refused_naming_the_tensor(
    toy_model, tmp_path
):
    """A weight of 3e38 is finite, and its products overflow the compute dtype. Refused at
    load, naming the tensor; one below the limit loads."""
    tensors = bf16_tensors(toy_model, torch.float32)
    tensors["norm.weight"][:2] = 3e38  # finite, but their sum is inf
    path = write(tmp_path / "big.safetensors", tensors, toy_model.cfg.to_dict())
    with pytest.raises(ValueError, match=r"tensor norm.weight holds a weight of 3e\+38, beyond"):
        load(path)
    tensors["norm.weight"][:2] = 1e19
    path = write(tmp_path / "large.safetensors", tensors, toy_model.cfg.to_dict())
    assert load(path).norm.weight[0] == 1e19


@pytest.mark.parametrize(
    "dtype, name",
    [
        (torch.int32, "I32"),
        (torch.int64, "I64"),
        (torch.uint8, "U8"),
        (torch.bool, "BOOL"),
        (torch.float64, "F64"),
    ],
)
def test_weights_of_a_non_float_dtype_are_refused(toy_model, tmp_path, dtype, name):
    tensors = bf16_tensors(toy_model)
    tensors["norm.weight"] = torch.ones(64, dtype=dtype)
    path = write(tmp_path / "int.safetensors", tensors, toy_model.cfg.to_dict())
    with pytest.raises(
        ValueError,
        match=rf"int.safetensors: tensor norm.weight has dtype {name}; weights are one of "
        r"BF16, F16, F32",
    ):
        load(path)


def test_a_long_list_of_missing_tensors_is_cut_short(tmp_path):
    """A header can name thousands of tensors: the message names five of each."""
    path = write(
        tmp_path / "few.safetensors", {f"x{i:02}": torch.zeros(1) for i in range(20)}, toy_config()
    )
    five = r"\['[\w.]+', '[\w.]+', '[\w.]+', '[\w.]+', '[\w.]+'\]"
    with pytest.raises(
        ValueError,
        match=rf"missing tensors {five} and 10 more, unexpected \['x00', 'x01', 'x02', 'x03', "
        rf"'x04'\] and 15 more$",
    ):
        load(path)


# --- save writes only what load reads back ---------------------------------------------------


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"config": {"d_model": 64}}, r"extra key 'config' is reserved: load\(\) reads it"),
        ({"val_loss": float("nan")}, r"extra\['val_loss'\] is not JSON-serialisable: Out of range"),
        ({"when": time}, r"extra\['when'\] is not JSON-serialisable: Object of type module"),
        ({"ids": {1, 2}}, r"extra\['ids'\] is not JSON-serialisable: Object of type set"),
        ({1: "one"}, r"extra keys must be strings, got 1"),
        ([("val_loss", 1.0)], r"extra must be a dict of JSON values, got .* \(list\)"),
    ],
)
def test_save_refuses_extra_metadata_load_cannot_read_back(toy_model, tmp_path, extra, message):
    path = tmp_path / "toy.safetensors"
    with pytest.raises(ValueError, match=message):
        save(toy_model, path, extra=extra)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_extra_metadata_of_json_values_loads_back(toy_model, tmp_path):
    path = tmp_path / "toy.safetensors"
    extra = {"val_loss": 1.25, "note": "café", "steps": [1, 2], "run": {"seed": 0}, "x": None}
    save(toy_model, path, extra=extra)
    with safe_open(str(path), framework="pt") as f:
        assert {k: json.loads(v) for k, v in f.metadata().items() if k != "config"} == extra
    assert load(path).cfg == toy_model.cfg


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 3.4e38])  # 3.4e38: inf in bf16
def test_save_refuses_non_finite_weights(toy_model, tmp_path, value):
    model = copy.deepcopy(toy_model)
    with torch.no_grad():
        model.blocks[0].attn.wo.weight[1, 2] = value
    with pytest.raises(
        ValueError,
        match=r"not saving toy.safetensors: tensor blocks.0.attn.wo.weight holds 1 non-finite",
    ):
        save(model, tmp_path / "toy.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_save_refuses_weights_that_do_not_fit_the_config(toy_model, tmp_path):
    model = copy.deepcopy(toy_model)
    model.lm_head = torch.nn.Linear(64, 10, bias=False)
    with pytest.raises(
        ValueError,
        match=r"not saving toy.safetensors: tensor lm_head.weight has shape \(10, 64\), "
        r"the config needs \(258, 64\)",
    ):
        save(model, tmp_path / "toy.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_save_checks_its_model_and_path(toy_model, tmp_path):
    with pytest.raises(ValueError, match=r"save needs a tinyllm Transformer, got .* \(dict\)"):
        save(dict(toy_model.state_dict()), tmp_path / "toy.safetensors")
    with pytest.raises(ValueError, match=r"cannot write .*: not a file name in an existing folder"):
        save(toy_model, tmp_path / "no" / "toy.safetensors")
    with pytest.raises(ValueError, match=r"cannot write .*: not a file name in an existing folder"):
        save(toy_model, tmp_path)


def test_a_failed_save_leaves_the_old_file_whole(toy_model, tmp_path, monkeypatch):
    path = tmp_path / "toy.safetensors"
    digest = save(toy_model, path)

    def crash(tensors, filename, metadata):
        with open(filename, "wb") as f:
            f.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "save_file", crash)
    with pytest.raises(OSError, match="disk full"):
        save(toy_model, path, force=True)
    assert sha256(path) == digest and list(tmp_path.iterdir()) == [path]


def test_save_leaves_the_users_files_beside_it_alone(toy_model, tmp_path):
    """save() writes to a temporary name of its own, then renames: a user's F.partial beside F
    is neither overwritten nor deleted, and nothing of save's is left behind."""
    target, theirs = tmp_path / "m.safetensors", tmp_path / "m.safetensors.partial"
    theirs.write_text("the user's own file")
    save(toy_model, target)
    assert theirs.read_text() == "the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name, theirs.name]
    assert load(target).cfg == toy_model.cfg


def test_save_writes_over_an_existing_file_only_when_forced(toy_model, tmp_path):
    mine = tmp_path / "mine.safetensors"
    mine.write_text("a learner's own file")
    with pytest.raises(ValueError, match=r"mine.safetensors exists: pass force=True"):
        save(toy_model, mine)
    assert mine.read_text() == "a learner's own file"
    digest = save(toy_model, mine, force=True)
    assert sha256(mine) == digest


@pytest.mark.parametrize("how", ["the same path", "a symlink", "a hard link"])
def test_save_never_writes_over_the_file_the_model_was_loaded_from(toy_model, tmp_path, how):
    source = tmp_path / "source.safetensors"
    digest = save(toy_model, source)
    model = load(source)
    target = {"the same path": source, "a symlink": tmp_path / "link.safetensors",
              "a hard link": tmp_path / "hard.safetensors"}[how]  # fmt: skip
    if how == "a symlink":
        target.symlink_to(source)
    elif how == "a hard link":
        os.link(source, target)
    with pytest.raises(ValueError, match="is the file this model was loaded from"):
        save(model, target, force=True)
    assert sha256(source) == digest
    save(model, tmp_path / "copy.safetensors")  # another file: saved


def test_save_knows_the_loaded_file_from_any_folder(toy_model, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    save(toy_model, "m.safetensors")
    model = load("m.safetensors")  # a path relative to folder a
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(ValueError, match="is the file this model was loaded from"):
        save(model, tmp_path / "a" / "m.safetensors", force=True)
    save(model, "m.safetensors")  # b/m.safetensors: another file
