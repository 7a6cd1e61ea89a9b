"""ModelConfig checks itself: a config may come from an untrusted file (checkpoint.load)."""

import dataclasses
import re

import pytest

from tinyllm import ModelConfig, get_config
from tinyllm.config import MAX_LAYERS, MAX_MATRIX, MAX_ROPE, MAX_SIZE, PRESETS, SIZES


def test_the_presets_are_valid_configs():
    assert get_config("tiny") == ModelConfig()
    for cfg in PRESETS.values():
        assert ModelConfig(**cfg.to_dict()) == cfg


def test_the_limits_admit_a_large_published_model():
    """Llama 3.1 405B's shapes: the limits stop absurd sizes, not real ones."""
    big = ModelConfig(
        vocab_size=128256,
        d_model=16384,
        n_layers=126,
        n_heads=128,
        n_kv_heads=8,
        ffn_hidden=53248,
        max_seq_len=131072,
        rope_theta=500000.0,
    )
    assert big.head_dim == 128


@pytest.mark.parametrize("name", SIZES)
@pytest.mark.parametrize("bad", [0, -1, True, False, 8.0, "8", None, "limit + 1"])
def test_every_size_is_an_int_from_one_to_its_limit(name, bad):
    limit = MAX_LAYERS if name == "n_layers" else MAX_SIZE
    bad = limit + 1 if bad == "limit + 1" else bad
    with pytest.raises(
        ValueError, match=rf"{name} must be an int in \[1, {limit}\], got {re.escape(repr(bad))}$"
    ):
        ModelConfig(**{name: bad})


def test_sizes_at_their_limits_are_accepted():
    ModelConfig(vocab_size=MAX_SIZE)
    ModelConfig(n_layers=MAX_LAYERS)
    ModelConfig(max_seq_len=MAX_SIZE, d_model=64, n_heads=2, n_kv_heads=1)  # RoPE: 2**24
    ModelConfig(d_model=2, n_heads=1, n_kv_heads=1, ffn_hidden=MAX_SIZE)


NOT_ABOVE_ONE = [0, 1, 1.0, 0.5, -10000.0, -float("inf")]
NOT_FINITE_NUMBERS = [float("nan"), float("inf"), 10**400, True, "1e4", None]


@pytest.mark.parametrize("bad", NOT_ABOVE_ONE + NOT_FINITE_NUMBERS)
def test_rope_theta_is_a_finite_number_above_one(bad):
    with pytest.raises(
        ValueError, match=rf"rope_theta must be a finite number > 1, got {re.escape(repr(bad))}$"
    ):
        ModelConfig(rope_theta=bad)


@pytest.mark.parametrize("good", [1.0001, 10000, 500000.0, 1e300])
def test_rope_theta_accepts_finite_numbers_above_one(good):
    assert ModelConfig(rope_theta=good).rope_theta == good


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"d_model": 250}, r"d_model 250 is not a multiple of n_heads 8"),
        ({"n_kv_heads": 3}, r"n_heads 8 is not a multiple of n_kv_heads 3"),
        ({"n_kv_heads": 16}, r"n_heads 8 is not a multiple of n_kv_heads 16"),
        ({"d_model": 24}, r"head_dim 3 must be even for RoPE"),
    ],
)
def test_heads_must_divide_the_width(kw, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kw)


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            {"vocab_size": 2**20, "d_model": 2**12, "n_heads": 2**5, "n_kv_heads": 2**4},
            r"d_model 4096 × vocab_size 1048576 = 4294967296 elements > 2147483648 in one "
            r"weight matrix",
        ),
        (
            {"d_model": 2**16, "ffn_hidden": 2**15, "n_heads": 2**10, "n_kv_heads": 2**10},
            r"d_model 65536 × 2·ffn_hidden 65536 = 4294967296 elements > 2147483648",
        ),
        (
            {"d_model": 2**16, "n_heads": 2**10, "n_kv_heads": 2**10},
            r"d_model 65536 × qkv width 196608 = 12884901888 elements > 2147483648",
        ),
        (
            {"max_seq_len": 2**20, "d_model": 2**7, "n_heads": 1, "n_kv_heads": 1},
            r"max_seq_len 1048576 × head_dim/2 64 = 67108864 elements > 16777216 in a RoPE table",
        ),
    ],
)
def test_products_of_sizes_are_bounded(kw, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kw)


def test_products_at_their_limits_are_accepted():
    assert 2**11 * 2**20 == MAX_MATRIX and 2**20 * 2**4 == MAX_ROPE
    ModelConfig(vocab_size=2**20, d_model=2**11, n_heads=2**6, n_kv_heads=2**5)
    ModelConfig(max_seq_len=2**20, d_model=2**5, n_heads=1, n_kv_heads=1)


def test_a_changed_copy_is_checked_too():
    with pytest.raises(ValueError, match=r"n_layers must be an int in \[1, 256\], got 0"):
        dataclasses.replace(ModelConfig(), n_layers=0)
