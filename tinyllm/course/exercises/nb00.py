"""Checkers of notebook 00 · setup."""

from tinyllm.config import get_config
from tinyllm.course.exercises.harness import (
    Verdict,
    as_int,
    checker,
    hint,
    items,
    ok,
    shown,
    shown_type,
)
from tinyllm.model import Block


@checker
def check_token_count(answer, text: str) -> Verdict:
    """Exercise: how many ids does Tokenizer().encode(text) return? One per UTF-8 byte.
    The answer is an int (numpy's, and a one-element integer tensor or array, count too, as
    in every checker: harness.as_int)."""
    if answer is None:
        hint("Not answered yet: set `answer` to the number of tokens you predict.")
        return False
    if as_int(answer) is None:
        hint(f"The answer is a number of tokens, an int; got {shown_type(answer)}.")
        return False
    if not isinstance(text, str):
        hint(f"check_token_count(answer, text) takes the cell's text, a str; got "
             f"{shown_type(text)}. Pass the text the cell above encodes.")  # fmt: skip
        return False
    answer = as_int(answer)
    n_bytes, n_chars = len(text.encode("utf-8")), len(text)
    if answer == n_bytes:
        ok(f"{n_bytes} tokens for {n_chars} characters: one token per UTF-8 byte.")
        return True
    if answer < 0:
        size = " (its size is right)" if -answer == n_bytes else ""
        hint(
            f"{answer} is negative{size}: a number of tokens is 0 or more, "
            "one token per UTF-8 byte of the text."
        )
    elif answer == n_chars:
        hint(
            f"{answer} is the number of characters. The tokenizer counts bytes: "
            "how many bytes does UTF-8 use for each character that is not ASCII?"
        )
    else:
        hint(
            f"Not {answer}. UTF-8 writes an ASCII character in 1 byte, an accented "
            "Latin letter in 2, most other symbols (such as €) in 3, and an emoji in 4."
        )
    return False


def param_split(config: str = "tiny") -> tuple[int, int]:
    """(attention, feed-forward) parameter counts of one block of a preset."""
    block = Block(get_config(config))
    return (
        sum(p.numel() for p in block.attn.parameters()),
        sum(p.numel() for p in block.ffn.parameters()),
    )


def _scaled(got: int, right: int, n_layers: int) -> str | None:
    """What a count k times one block's (k ≥ 2) is likely to be: all the blocks, or bytes
    (2 per parameter in bf16, 4 in fp32), or both; None if it is no such multiple."""
    if right <= 0 or got % right or got // right < 2:
        return None
    k = got // right
    readings = [
        what
        for blocks, size, what in (
            (n_layers, 1, f"all {n_layers} blocks' parameters"),
            (1, 2, "one block's bytes in bf16 (2 per parameter)"),
            (1, 4, "one block's bytes in fp32 (4 per parameter)"),
            (n_layers, 2, f"all {n_layers} blocks' bytes in bf16"),
            (n_layers, 4, f"all {n_layers} blocks' bytes in fp32"),
        )
        if blocks * size == k
    ]
    return f"{k}× one block's count, as for {', or for '.join(readings)}" if readings else None


@checker
def check_param_split(answer) -> Verdict:
    """Exercise: (attention, feed_forward) parameter counts of one block of the shipped model."""
    if answer is None:
        hint("Not answered yet: set `answer = (attention, feed_forward)`, two ints.")
        return False
    pair = items(answer)
    if pair is None or len(pair) != 2 or any(as_int(a) is None for a in pair):
        hint(f"The answer is a pair of ints (attention, feed_forward), got {shown(answer)}.")
        return False
    cfg = get_config("tiny")
    attn, ffn = param_split("tiny")
    a, f = (as_int(x) for x in pair)
    if (a, f) == (attn, ffn):
        ok(
            f"attention {attn:,}, feed-forward {ffn:,}: the feed-forward holds "
            f"{ffn / attn:.0f}× the attention's parameters."
        )
        return True
    if (a, f) == (ffn, attn):
        hint("Right numbers, swapped: the answer is (attention, feed_forward).")
        return False
    norm = cfg.d_model  # one RMSNorm's weight
    d = cfg.d_model
    scaled_a, scaled_f = _scaled(a, attn, cfg.n_layers), _scaled(f, ffn, cfg.n_layers)
    if scaled_a and scaled_a == scaled_f:
        hint(
            f"Both numbers are {scaled_a}. The answer is one block's parameters "
            "(model.blocks[0]), counted, not in bytes."
        )
        return False
    hints = []
    if a == attn:
        hints.append("The attention count is right.")
    elif scaled_a:
        hints.append(f"Attention: {a:,} is {scaled_a}; count one block's parameters.")
    elif a in (attn + norm, attn + 2 * norm):
        hints.append("Attention: count only block.attn; the RMSNorms sit outside it.")
    elif a == 4 * d * d:
        hints.append(
            "Attention: wqkv makes n_heads query heads but only n_kv_heads key heads and "
            "n_kv_heads value heads (grouped-query attention), so it is not 3 × d_model wide."
        )
    else:
        hints.append("Attention: add up in_features × out_features of wqkv and wo (no biases).")
    if f == ffn:
        hints.append("The feed-forward count is right.")
    elif scaled_f:
        hints.append(f"Feed-forward: {f:,} is {scaled_f}; count one block's parameters.")
    elif f in (ffn + norm, ffn + 2 * norm):
        hints.append("Feed-forward: count only block.ffn; the RMSNorms sit outside it.")
    elif f == 2 * d * cfg.ffn_hidden:  # w13 counted as one ffn_hidden wide, or w2 forgotten
        hints.append(
            "Feed-forward: SwiGLU's w13 makes two vectors of ffn_hidden (the gate and the "
            "up projection), and w2 maps ffn_hidden back to d_model."
        )
    else:
        hints.append("Feed-forward: add up in_features × out_features of w13 and w2.")
    hint(" ".join(hints))
    return False
