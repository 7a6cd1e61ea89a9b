"""tinyllm.course.exercises.nb00: the checkers of notebook 00's exercises.

A checker must accept the right answer, reject every wrong one with a hint (never a
traceback), and say "[OK]" only when it returns True.
"""

import pytest

from tinyllm import Tokenizer, load_pretrained
from tinyllm.course.exercises import check_param_split, check_token_count
from tinyllm.course.exercises.nb00 import param_split

TEXT = "naïve café: 3 € 🐍"
ATTN, FFN = 196_608, 589_824  # one block of the shipped "tiny" model


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
    assert out.startswith("[HINT]") and "[OK]" not in out


def test_token_count_characters_hint(capsys):
    check_token_count(len(TEXT), TEXT)
    assert "number of characters" in capsys.readouterr().out


def test_token_count_ascii():
    assert check_token_count(5, "hello") is True


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


@pytest.mark.parametrize("answer", [(ATTN, FFN), [ATTN, FFN]])
def test_param_split_right(answer, capsys):
    assert check_param_split(answer) is True
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
    assert check_param_split(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and hint in out and "[OK]" not in out
