"""Eager generation: prefill the prompt, then decode one token at a time.

    logits = prefill(model, idx, cache)          # the whole prompt in one call
    repeat: tok = sample(logits); logits = decode_step(model, cache, tok)

This is the reference path. It is exact and simple, and on a GPU it is slow for a small
model: every decode step launches dozens of tiny kernels from the CPU, one per op, and the
CPU needs longer to launch them than the GPU needs to run them (notebook 01).
graphs.py makes the same loop fast; this file is what it is checked against.

Every precision choice (the compute dtype, autocast, SDPA's kernels) is made in
precision.py; every forward here runs under precision(model).
"""

import torch
from torch import Tensor

from tinyllm.kv_cache import KVCache
from tinyllm.precision import model_device, precision
from tinyllm.validate import (
    validate_cache,
    validate_generate_args,
    validate_ids,
    validate_model,
    validate_prompt,
)

# --- the inference phases -----------------------------------------------------------------


@torch.no_grad()
def prefill(model, idx: Tensor, cache, check: bool = True) -> Tensor:
    """Run the whole prompt (B, T) through the model, filling the cache; logits (B, T, V).
    check=False skips the checks of idx and of the cache, for callers that made them."""
    if check:
        validate_prompt(idx, model, max_len=validate_cache(cache, model, protocol=True))
    with precision(model):
        logits, _ = model(idx, cache=cache, check=False)
    return logits


@torch.no_grad()
def decode_step(model, cache, tok: Tensor, check: bool = True) -> Tensor:
    """One token per row (B, 1) → logits (B, 1, V); the cache grows by one position.

    check=False skips the id check (one device sync) for tokens that generate() sampled
    itself, which are always in range."""
    if check:
        validate_cache(cache, model, protocol=True)
        validate_ids(tok, model.cfg.vocab_size, validate_model(model), name="tok")
        if tok.dim() != 2 or tok.shape[1] != 1:
            raise ValueError(f"tok must have shape (B, 1), got {tuple(tok.shape)}")
    with precision(model):
        logits, _ = model(tok, cache=cache, check=False)
    return logits


def sample(
    logits: Tensor,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """logits (B, V) → next ids (B, 1). temperature 0 is greedy (argmax)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def make_generator(seed: int | None, device) -> torch.Generator | None:
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed(seed)


def decode_n_tokens(
    logits: Tensor,
    step,
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """The decode loop shared by every generator: sample from the last logits, feed the
    token to step(tok) → logits, repeat. After a row emits eos_id the rest of that row is
    eos_id; the loop stops early once every row has. Returns (B, max_new_tokens)."""
    generator = make_generator(seed, logits.device)
    B = logits.shape[0]
    out = torch.empty(B, max_new_tokens, dtype=torch.long, device=logits.device)
    done = torch.zeros(B, 1, dtype=torch.bool, device=logits.device)
    for t in range(max_new_tokens):
        tok = sample(logits[:, -1], temperature, top_k, generator)
        if eos_id is not None:
            tok = tok.masked_fill(done, eos_id)
            done |= tok == eos_id
        out[:, t : t + 1] = tok
        if t + 1 == max_new_tokens:
            break
        if eos_id is not None and bool(done.all()):
            out[:, t + 1 :] = eos_id
            break
        logits = step(tok)
    return out


@torch.no_grad()
def generate(
    model,
    idx: Tensor,
    max_new_tokens: int,
    *,
    pad_lens: Tensor | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """Eager generation with the dynamic KVCache. idx (B, T) is left-padded by pad_lens (B,)
    when rows differ in length; pads occupy positions (RoPE is relative, so a padded row
    matches its unpadded run up to rounding). Returns the new ids, (B, max_new_tokens)."""
    validate_model(model)
    validate_generate_args(max_new_tokens, temperature, top_k, model.cfg.vocab_size, seed, eos_id)
    validate_prompt(idx, model, max_new_tokens, pad_lens)
    cache = KVCache(model.cfg.n_layers, pad_lens)
    logits = prefill(model, idx, cache, check=False)
    step = lambda tok: decode_step(model, cache, tok, check=False)  # noqa: E731
    return decode_n_tokens(
        logits, step, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed, eos_id=eos_id
    )


def left_pad(prompts: list[list[int]], pad_id: int, device=None) -> tuple[Tensor, Tensor]:
    """Token lists of different lengths → idx (B, T) left-padded with pad_id, pad_lens (B,)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    T = max(len(p) for p in prompts)
    idx = torch.tensor([[pad_id] * (T - len(p)) + list(p) for p in prompts], device=device)
    pad_lens = torch.tensor([T - len(p) for p in prompts], device=device)
    return idx, pad_lens


def complete(
    model,
    prompts: list[str],
    max_new_tokens: int = 200,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    stop_at_eos: bool = True,
) -> list[str]:
    """Text in, text out: each prompt continued by the model (greedy by default)."""
    from tinyllm.tokenizer import Tokenizer

    tokenizer = Tokenizer()
    if isinstance(prompts, str) or not isinstance(prompts, (list, tuple)):
        raise ValueError("complete takes a list of prompts; wrap a single one in [...]")
    validate_model(model)
    idx, pad_lens = left_pad(
        [tokenizer.encode(p) for p in prompts], tokenizer.pad_id, model_device(model)
    )
    out = generate(
        model,
        idx,
        max_new_tokens,
        pad_lens=pad_lens if bool(pad_lens.any()) else None,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        eos_id=tokenizer.eos_id if stop_at_eos else None,
    )
    return [tokenizer.decode(row) for row in out.tolist()]
