"""The prompts every lesson and the bench decode from: one sentence of Python's documentation,
repeated to the length asked for (notebooks 01-07, bench.py)."""

import torch

from tinyllm.tokenizer import Tokenizer

PROMPT = "The for statement is used to iterate over the elements of a sequence"


def prompt_ids(prompt_len: int) -> list[int]:
    """The first prompt_len byte ids of PROMPT, repeated."""
    return Tokenizer().encode(PROMPT * (1 + prompt_len // len(PROMPT)))[:prompt_len]


def prompt_batch(batch: int, prompt_len: int, device) -> torch.Tensor:
    """(batch, prompt_len) ids: the same prompt in every row."""
    return torch.tensor([prompt_ids(prompt_len)] * batch, device=device)
