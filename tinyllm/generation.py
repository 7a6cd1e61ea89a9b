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

from tinyllm.kernels import triton, triton_sample
from tinyllm.kv_cache import KVCache
from tinyllm.precision import model_device, precision
from tinyllm.validate import (
    LIMITS,
    shown,
    validate_bool,
    validate_cache,
    validate_generate_args,
    validate_ids,
    validate_int,
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
        if isinstance(cache, KVCache):
            cache.validate_batch(idx.shape[0])
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
        if isinstance(cache, KVCache):
            cache.validate_batch(tok.shape[0])
    with precision(model):
        logits, _ = model(tok, cache=cache, check=False)
    return logits


# --- sampling: one call for every row, on the device ----------------------------------------
#
# The noise comes from a hash, not from a generator's state: the uniform for vocabulary id v
# in a row is hash(seed, position, v), so a request draws the same noise alone or batched, in
# any row, eager or replayed from a graph, with nothing to carry from one step to the next and
# nothing for the host to read. Gumbel-max then turns the noise into a draw: the argmax of
# logits / T + Gumbel(u) over the top-k ids is a sample of softmax(logits / T) over them.

_M64 = 2**64  # splitmix64's constants as int64 bit patterns (those above 2**63 wrap negative)
_GOLDEN, _MIX1, _MIX2 = (
    c - _M64 for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
)


def _shr(z: Tensor, s: int) -> Tensor:
    """Logical right shift of int64: torch's >> copies the sign bit, so mask it away."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def splitmix64(z: Tensor) -> Tensor:
    """splitmix64's finaliser on int64 tensors (multiplications wrap mod 2**64, as in C)."""
    z = z + _GOLDEN
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def uniform_noise(seed: Tensor, position: Tensor, vocab_size: int) -> Tensor:
    """(B, vocab_size) uniforms in (0, 1), float32: hash(seed, position, id) per entry.
    Trusted, as sample is: it checks nothing, so that a graph can capture it; its seeds and
    positions come through a door that checked them (validate_sampling)."""
    ids = torch.arange(vocab_size, device=seed.device)
    h = splitmix64(splitmix64(seed) ^ position)[:, None]  # (B, 1): one stream per row
    bits = _shr(splitmix64(h ^ ids), 41)  # the top 23 bits, k in [0, 2**23)
    return (bits.float() + 0.5) * 2.0**-23  # exact in float32: never 0, never 1


def _sample(logits: Tensor, temperature: Tensor, top_k: Tensor, seed: Tensor,
            position: Tensor) -> Tensor:  # fmt: skip
    """Every row's next id at once: logits (B, V) → ids (B,), int64, on logits' device.

    Per row: temperature (B,) (0: greedy, the argmax exactly), top_k (B,) int (0 or V: every
    id), seed (B,) int64 and position (B,) int (int32 or int64), the position of the token
    being drawn. The noise is uniform_noise(seed, position): the same (seed, position) draws
    the same token whatever the batch, the row or the other rows. No host sync, fixed shapes:
    capturable in a graph. The arguments were checked at the door (validate_sampling).

    A torch custom op. Off CUDA it runs reference_sample, about 70 tensor ops, each a kernel
    on a GPU. On CUDA it runs one Triton kernel, one program a row (kernels.sample_kernel):
    the same ids in one launch (notebook 11, results/h200_sampler.json)."""
    return reference_sample(logits, temperature, top_k, seed, position)


sample = torch.library.custom_op("tinyllm::sample", _sample, mutates_args=())
sample.__doc__ = _sample.__doc__  # the op shows its function's docstring, not its class's
if triton is not None:
    sample.register_kernel("cuda")(triton_sample)


@sample.register_fake
def _(logits, temperature, top_k, seed, position):
    return logits.new_empty(logits.shape[0], dtype=torch.long)


def reference_sample(logits: Tensor, temperature: Tensor, top_k: Tensor, seed: Tensor,
                     position: Tensor) -> Tensor:  # fmt: skip
    """sample in PyTorch: the argmax, or Gumbel-max over the top-k ids with the hash's noise."""
    B, V = logits.shape
    logits = logits.float()
    greedy = logits.argmax(dim=-1)
    t = torch.where(temperature > 0, temperature, 1.0).float()[:, None]
    k = torch.where((top_k > 0) & (top_k < V), top_k, V)[:, None]
    kth = logits.sort(dim=-1, descending=True).values.gather(1, k - 1)
    u = uniform_noise(seed, position, V)
    gumbel = -torch.log(-torch.log(u))
    scores = (logits / t + gumbel).masked_fill(logits < kth, float("-inf"))
    return torch.where(temperature > 0, scores.argmax(dim=-1), greedy)


def draw_seeds(n: int) -> list[int]:
    """Seeds for unseeded requests, drawn once from torch's default generator: the path is
    the seeded one, and the draws stay as random as torch.manual_seed leaves them. n: one a
    row, at most LIMITS.rows."""
    validate_int("n", n, hi=LIMITS.rows)
    return torch.randint(0, 2**62, (n,)).tolist()


def decode_n_tokens(
    logits: Tensor,
    step,
    max_new_tokens: int,
    *,
    prompt_lens: Tensor,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
    eos_id: int | None = None,
) -> Tensor:
    """The decode loop shared by every generator: sample from the last logits, feed the
    token to step(tok) → logits, repeat. prompt_lens (B,) is each row's prompt length without
    its pads: the position of its first new token, which keys its noise with the seed (every
    row takes the seed; None: one drawn per row), so a row draws what it draws alone or in
    the engine. After a row emits eos_id the rest of that row is eos_id; the loop stops early
    once every row has. Returns (B, max_new_tokens)."""
    B, device = logits.shape[0], logits.device
    if temperature != 0:  # the per-row sampling arguments, made once
        seeds = torch.tensor(draw_seeds(B) if seed is None else [seed] * B, device=device)
        temperatures = torch.full((B,), float(temperature), device=device)
        top_ks = torch.full((B,), top_k or 0, dtype=torch.long, device=device)
        position = prompt_lens.to(device=device, dtype=torch.long)
    out = torch.empty(B, max_new_tokens, dtype=torch.long, device=device)
    done = torch.zeros(B, 1, dtype=torch.bool, device=device)
    for t in range(max_new_tokens):
        if temperature == 0:  # greedy everywhere: the argmax, which sample() would return
            tok = logits[:, -1].argmax(dim=-1, keepdim=True)
        else:
            tok = sample(logits[:, -1], temperatures, top_ks, seeds, position + t)[:, None]
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
        logits, step, max_new_tokens, prompt_lens=prompt_lens(idx, pad_lens),
        temperature=temperature, top_k=top_k, seed=seed, eos_id=eos_id,
    )  # fmt: skip


def prompt_lens(idx: Tensor, pad_lens: Tensor | None) -> Tensor:
    """Each row's prompt length without its left pads, (B,) on idx's device."""
    T = torch.full((idx.shape[0],), idx.shape[1], dtype=torch.long, device=idx.device)
    return T if pad_lens is None else T - pad_lens.to(T.device)


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
        raise ValueError(f"complete takes a list of prompts, got {shown(prompts)}; wrap a single "
                         f"one in [...]")  # fmt: skip
    validate_bool("stop_at_eos", stop_at_eos)
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
