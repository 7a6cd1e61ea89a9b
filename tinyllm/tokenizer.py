"""Byte-level tokenizer: ids 0-255 are the bytes of UTF-8 text, then two special ids.

No vocabulary file and nothing to download: every string round-trips exactly.
"""

from tinyllm.validate import is_int, shown, validate_tensor


class Tokenizer:
    n_bytes = 256
    eos_id = 256  # end of a document
    pad_id = 257  # left padding in a batch; never attended to
    vocab_size = 258

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"encode takes a str, got {shown(text)}")
        try:
            return list(text.encode("utf-8"))
        except UnicodeEncodeError as e:  # a lone surrogate: text that is no Unicode
            raise ValueError(f"text holds {text[e.start]!r} at position {e.start}, a lone "
                             f"surrogate, which UTF-8 cannot encode") from None  # fmt: skip

    def decode(self, ids) -> str:
        """Bytes back to text; special ids are dropped, invalid UTF-8 becomes U+FFFD."""
        if hasattr(ids, "tolist"):  # a tensor (or an array)
            if hasattr(ids, "layout"):
                validate_tensor(ids, "ids")
            ids = ids.tolist()
        if not isinstance(ids, (list, tuple, range)):
            raise ValueError(f"decode takes a list of int ids, got {shown(ids)}")
        bad = [i for i in ids if not is_int(i) or not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(
                f"token id {bad[0]!r} outside the vocabulary [0, {self.vocab_size}) of int ids"
            )
        return bytes(i for i in ids if i < self.n_bytes).decode("utf-8", errors="replace")
