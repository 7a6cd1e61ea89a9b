"""The byte-level tokenizer: every string round-trips; bad bytes and ids are handled."""

import pytest

from tinyllm import Tokenizer

TEXTS = [
    "",
    "The for statement",
    "tabs\tand\nnewlines\r\n",
    "café, naïve, Ångström, façade",  # accents (two-byte UTF-8)
    "日本語のテキスト, 中文, 한국어",  # CJK (three bytes)
    "emoji 🐍🚀 and a family 👨‍👩‍👧",  # four bytes, and zero-width joiners
    "\x00 nul and \u00ff and \uffff",
]


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tokenizer, text):
    ids = tokenizer.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert all(isinstance(i, int) and 0 <= i < tokenizer.n_bytes for i in ids)
    assert tokenizer.decode(ids) == text


def test_non_ascii_takes_several_bytes(tokenizer):
    assert len(tokenizer.encode("é")) == 2
    assert len(tokenizer.encode("語")) == 3
    assert len(tokenizer.encode("🐍")) == 4


def test_special_ids(tokenizer):
    assert (tokenizer.eos_id, tokenizer.pad_id, tokenizer.vocab_size) == (256, 257, 258)
    assert Tokenizer.vocab_size == 258
    # special ids are dropped from the text
    ids = [tokenizer.pad_id] * 3 + tokenizer.encode("ok") + [tokenizer.eos_id]
    assert tokenizer.decode(ids) == "ok"


@pytest.mark.parametrize(
    "data, text",
    [
        (b"\xff", "\ufffd"),
        (b"ab\xc3", "ab\ufffd"),  # a truncated two-byte sequence
        ("🐍".encode()[:3] + b"x", "\ufffdx"),  # a truncated emoji, then ASCII
        (b"\x80\x80ok", "\ufffd\ufffdok"),  # lone continuation bytes
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # a UTF-16 surrogate is not UTF-8
    ],
)
def test_invalid_utf8_becomes_replacement_characters(tokenizer, data, text):
    assert tokenizer.decode(list(data)) == text


def test_decode_accepts_a_tensor_row(tokenizer):
    import torch

    assert tokenizer.decode(torch.tensor(tokenizer.encode("héllo"))) == "héllo"


@pytest.mark.parametrize("bad", [-1, 258, 1000])
def test_decode_rejects_ids_outside_the_vocabulary(tokenizer, bad):
    with pytest.raises(ValueError, match=rf"token id {bad} outside the vocabulary \[0, 258\)"):
        tokenizer.decode([65, bad])


@pytest.mark.parametrize("bad", [b"bytes", 12, None, ["a"]])
def test_encode_takes_only_str(tokenizer, bad):
    with pytest.raises(ValueError, match=rf"encode takes a str, got .*\({type(bad).__name__}\)"):
        tokenizer.encode(bad)
