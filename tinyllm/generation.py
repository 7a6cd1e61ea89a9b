"""Eager generation: prefill the prompt, then decode one token at a time.

    logits = prefill(model, idx, cache)          # the whole prompt in one call
    repeat: tok = sample(logits); logits = decode_step(model, cache, tok)

This is the reference path. It is exact and simple, and on a GPU it is slow for a small
model: every decode step launches dozens of tiny kernels from the CPU, one per op, and the
CPU needs longer to launch them than the GPU needs to run them (notebook 01).
graphs.py makes the same loop fast; this file is what it is checked against.

All precision choices are made in one place, here: a model computes in compute_dtype(its
device), bf16 on CUDA (fp16 where the GPU has no bf16) and fp32 on the CPU, and load()
returns its parameters in that dtype, so no step re-casts a weight. autocast(...) is the
context every forward runs in: it limits SDPA's kernels on CUDA, and only an fp32 model on
CUDA (one being trained) runs under bf16 autocast. Eager generate, both graph decoders and
the engine use the same weights and the same policy, so comparing them measures masks and
kernels, never a dtype.
"""

import contextlib

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from tinyllm.checks import check_generate_args, check_ids, check_prompt, model_device, model_dtype
from tinyllm.kv_cache import KVCache

# cuDNN's attention builds a new execution plan for every new key length: with the dynamic
# cache of eager decode that is one plan per token, which would hide the launch overhead this
# course is about (the bench records an eager step with cuDNN allowed,
# "eager_with_cudnn_attention" in results/h200.json; notebook 02 prints it). The other three
# SDPA kernels have no per-shape set-up.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def compute_dtype(device) -> torch.dtype:
    """The dtype a model computes in on `device`: bf16 on CUDA (fp16 where the GPU lacks
    bf16), fp32 on the CPU."""
    if torch.device(device).type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@contextlib.contextmanager
def autocast(device, attention_backends=None, param_dtype=None):
    """The context every forward pass runs in. On the CPU: nothing (fp32). On CUDA: SDPA
    limited to attention_backends (default ATTENTION_BACKENDS), and, when the parameters
    (param_dtype, default fp32) are not in the compute dtype already, autocast to it.

    A model from load() is in the compute dtype and needs no autocast: under autocast every
    step would cast every weight again, and norms and softmax would round-trip through fp32.
    cache_enabled=False: autocast's cache of cast weights does not survive graph capture."""
    device = torch.device(device)
    if device.type != "cuda":
        yield
        return
    dtype = compute_dtype(device)
    backends = ATTENTION_BACKENDS if attention_backends is None else attention_backends
    cast = (param_dtype or torch.float32) != dtype
    with (
        torch.autocast("cuda", dtype=dtype, cache_enabled=False, enabled=cast),
        sdpa_kernel(backends),
    ):
        yield


def activation_dtype(model) -> torch.dtype:
    """The dtype the model's activations, and so its keys and values, come out in: the
    compute dtype when autocast runs (an fp32 model on CUDA), else its parameters' dtype."""
    device, dtype = model_device(model), model_dtype(model)
    return compute_dtype(device) if device.type == "cuda" else dtype


def precision(model, attention_backends=None):
    """autocast(...) for this model: its device, its parameters' dtype."""
    return autocast(model_device(model), attention_backends, model_dtype(model))


# --- the inference phases -----------------------------------------------------------------


@torch.no_grad()
def prefill(model, idx: Tensor, cache, check: bool = True) -> Tensor:
    """Run the whole prompt (B, T) through the model, filling the cache; logits (B, T, V).
    check=False skips the check of idx, for callers that checked it already."""
    with precision(model):
        logits, _ = model(idx, cache=cache, check=check)
    return logits


@torch.no_grad()
def decode_step(model, cache, tok: Tensor, check: bool = True) -> Tensor:
    """One token per row (B, 1) → logits (B, 1, V); the cache grows by one position.

    check=False skips the id check (one device sync) for tokens that generate() sampled
    itself, which are always in range."""
    if check:
        check_ids(tok, model.cfg.vocab_size, model_device(model), name="tok")
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
    check_generate_args(max_new_tokens, temperature, top_k, model.cfg.vocab_size, seed, eos_id)
    check_prompt(idx, model, max_new_tokens, pad_lens)
    cache = KVCache(model.cfg.n_layers, first_valid=pad_lens)
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

    tok = Tokenizer()
    if isinstance(prompts, str):
        raise ValueError("complete takes a list of prompts; wrap a single one in [...]")
    idx, pad_lens = left_pad([tok.encode(p) for p in prompts], tok.pad_id, model_device(model))
    out = generate(
        model,
        idx,
        max_new_tokens,
        pad_lens=pad_lens if bool(pad_lens.any()) else None,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        eos_id=tok.eos_id if stop_at_eos else None,
    )
    return [tok.decode(row) for row in out.tolist()]
