"""tinyllm.course.exercises.nb00: the checkers of notebook 00's exercises.

A checker must accept the right answer, reject every wrong one with a hint (never a
traceback), and say "[OK]" only when it returns True.
"""

import numpy as np
import pytest
import torch
from conftest import JUNK_VALUES, Hostile, HostileList, assert_hint, assert_ok, failed, passed

from tinyllm import Tokenizer, load_pretrained
from tinyllm.course.exercises import check_param_split, check_token_count
from tinyllm.course.exercises.nb00 import param_split

TEXT = "naïve café: 3 € 🐍"
ATTN, FFN = 196_608, 589_824  # one block of the shipped "tiny" model


# --- exercise 1: token count -----------------------------------------------------------------


def test_token_count_right(capsys):
    n = len(Tokenizer().encode(TEXT))
    assert n == 24
    assert passed(check_token_count(n, TEXT))
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize("answer", [None, len(TEXT), 23, 25, 0, -1, "24", 24.0, True])
def test_token_count_wrong(answer, capsys):
    assert failed(check_token_count(answer, TEXT))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and "[OK]" not in out


@pytest.mark.parametrize(
    "answer", [np.int64(24), torch.tensor(24), torch.tensor([24], dtype=torch.int32)]
)
def test_token_count_takes_every_integer_type(answer, capsys):
    """The rule of every checker (harness.as_int): numpy's ints and one-element integer
    tensors are ints."""
    assert_ok(lambda a: check_token_count(a, TEXT), answer, capsys)


def test_token_count_characters_hint(capsys):
    check_token_count(len(TEXT), TEXT)
    assert "number of characters" in capsys.readouterr().out


def test_token_count_ascii():
    assert passed(check_token_count(5, "hello"))


# --- exercise 2: attention vs feed-forward ---------------------------------------------------


def test_param_split_matches_the_model():
    block = load_pretrained(device="cpu").blocks[0]
    assert (
        param_split()
        == (
            sum(p.numel() for p in block.attn.parameters()),
            sum(p.numel() for p in block.ffn.parameters()),
        )
        == (ATTN, FFN)
    )


@pytest.mark.parametrize("answer", [(ATTN, FFN), [ATTN, FFN], (np.int64(ATTN), torch.tensor(FFN))])
def test_param_split_right(answer, capsys):
    assert passed(check_param_split(answer))
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize(
    "answer, hint",
    [
        (None, "Not answered yet"),
        (ATTN, "pair of ints"),
        ((ATTN, FFN, 0), "pair of ints"),
        ((ATTN, float(FFN)), "pair of ints"),
        ((FFN, ATTN), "swapped"),
        ((4 * 256 * 256, FFN), "n_kv_heads"),
        ((ATTN, 2 * 256 * 768), "the gate and the up projection"),
        ((ATTN + 256, FFN), "count only block.attn"),
        ((ATTN, FFN + 256), "count only block.ffn"),
        ((ATTN, 1), "attention count is right"),
        ((1, FFN), "feed-forward count is right"),
    ],
)
def test_param_split_wrong(answer, hint, capsys):
    assert failed(check_param_split(answer))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out


# --- junk, for both checkers: a hint, never a traceback ----------------------------------

JUNK = {  # what a learner may hand in instead of a number or a pair
    **JUNK_VALUES,
    "float tensor 24": torch.tensor(24.0),
    "numpy float 24": np.float64(24.0),
    "pair with a hostile": (Hostile(), FFN),
    "pair with a float tensor": (ATTN, torch.tensor(float(FFN))),
    "hostile pair": HostileList([ATTN, FFN]),
    "numpy pair": np.array([ATTN, FFN]),
}
CHECKS = {
    "token_count": lambda answer: check_token_count(answer, TEXT),
    "param_split": check_param_split,
}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("answer", JUNK.values(), ids=JUNK)
def test_junk_gets_a_hint(check, answer, capsys):
    assert_hint(CHECKS[check], answer, capsys)


# --- the mistakes a cold read tried, each with its own hint -----------------------------------


@pytest.mark.parametrize("answer, size", [(-24, "its size is right"), (-5, "negative")])
def test_token_count_negative_gets_its_own_hint(answer, size, capsys):
    assert_hint(lambda a: check_token_count(a, TEXT), answer, capsys, "negative", size)


@pytest.mark.parametrize(
    "answer, words",
    [
        ((4 * ATTN, 4 * FFN), ["all 4 blocks' parameters", "one block's parameters"]),
        ((2 * ATTN, 2 * FFN), ["bytes in bf16", "one block's parameters", "not in bytes"]),
        ((8 * ATTN, 8 * FFN), ["all 4 blocks' bytes in bf16"]),
        ((4 * ATTN, FFN), ["Attention: 786,432 is 4×", "feed-forward count is right"]),
        ((ATTN, 2 * FFN), ["attention count is right", "Feed-forward", "bytes in bf16"]),
    ],
)
def test_param_split_whole_model_or_bytes_say_one_block(answer, words, capsys):
    assert_hint(check_param_split, answer, capsys, *words)
