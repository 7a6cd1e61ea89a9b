"""gpt-fast's decode recipe on the course's weights: the tool a learner would reach for, run the
way its own generate.py runs it, so that bench.py can time it beside the course's fastest step.

After gpt-fast (github.com/pytorch-labs/gpt-fast, now meta-pytorch/gpt-fast; BSD-3-Clause
licence, Copyright Meta Platforms, Inc.): model.py at commit 24428d7 and generate.py at commit
20c6671, the versions that attend with F.scaled_dot_product_attention. The design is theirs;
the code here is written anew in this project's words. Reproduced:

- model.py: a Transformer with a fused wqkv, wo, SwiGLU w1/w3/w2 and its own RMSNorm (fp32,
  then type_as); a KVCache module whose k_cache/v_cache buffers (B, n_kv_heads, max_seq_length,
  head_dim) are written by index at input_pos; setup_caches (length rounded up to a multiple
  of 8, freqs_cis for block_size positions in the weights' dtype, a boolean tril causal_mask);
  forward(idx, input_pos) gathers causal_mask[None, None, input_pos] and freqs_cis[input_pos];
  RoPE on interleaved pairs; GQA by repeat_interleave; SDPA with attn_mask.
- generate.py: sample (logits_to_probs with temperature and top_k, then
  multinomial_sample_one_no_sync), prefill, decode_one_token, decode_n_tokens (the SDPA
  backends it allows around each step, input_pos += 1 on the device, clones of what it keeps),
  its Inductor settings, the one line torch.compile(decode_one_token, mode="reduce-overhead",
  fullgraph=True), the cache sized min(prompt_len + max_new_tokens, block_size), and the
  defaults of its main(): temperature 0.8, top_k 200.

Changed on purpose: the course rotates pairs (x_j, x_{j+D/2}), gpt-fast pairs (x_2j, x_2j+1)
at the same frequencies, so from_course reorders the query and key rows inside each head (q·k,
hence the logits, are unchanged) and gpt-fast's RoPE code stays as it is. Inductor settings
hold only while a step compiles (a context manager restores them); the compiled function is
passed in, never swapped into a module global; errors are ValueErrors, and a step past the
cache raises where generate.py would index out of bounds. The decode loop copies each new
token once and feeds that copy back, where generate.py copies it twice (one copy kernel less
per step, in gpt-fast's favour). Speculative decoding, quantisation and tensor parallelism
are left out: they are not part of the step compared.

Not guaranteed: bit-equality with the course. On CUDA the weights and freqs_cis are bf16 (the
course keeps fp32 weights under bf16 autocast and fp32 RoPE tables) and the attention kernel
differs; in fp32 on the CPU the logits agree to ~1e-5 (tests/test_gptfast.py). gpt-fast's
newest generate.py (meta-pytorch 05f7c16) attends with FlexAttention block masks instead; that
variant is not reproduced here.
"""

import contextlib
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from tinyllm.generation import check_ids

# generate.py main()'s sampling defaults
TEMPERATURE, TOP_K = 0.8, 200
# the Inductor settings generate.py sets at import (it leaves enable_autograd_cache commented out)
GENERATE_PY_INDUCTOR = {
    "coordinate_descent_tuning": True,
    "triton.unique_kernel_names": True,
    "fx_graph_cache": True,
}
# generate.py decodes under sdp_kernel(enable_flash=False, enable_mem_efficient=False,
# enable_math=True), which leaves these two on; math wins, "better for Inductor to codegen".
GENERATE_PY_SDPA = [SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION]
# calls before a reduce-overhead step replays: compile, cudagraph-tree warm-up, recording
WARMUP_CALLS = 3


# --- model.py ------------------------------------------------------------------------------


@dataclass
class ModelArgs:
    """gpt-fast's ModelArgs, only the fields its model reads."""

    block_size: int
    vocab_size: int
    n_layer: int
    n_head: int
    dim: int
    intermediate_size: int
    n_local_heads: int
    rope_base: float
    norm_eps: float

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head


def find_multiple(n: int, k: int) -> int:
    return -(-n // k) * k


class KVCache(nn.Module):
    """Keys and values for every position up to max_seq_length, written by index."""

    def __init__(
        self,
        max_batch_size: int,
        max_seq_length: int,
        n_heads: int,
        head_dim: int,
        dtype: torch.dtype,
    ):
        super().__init__()
        shape = (max_batch_size, n_heads, max_seq_length, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype))

    def update(self, input_pos: Tensor, k_val: Tensor, v_val: Tensor) -> tuple[Tensor, Tensor]:
        """Write k_val, v_val (B, H, S, D) at positions input_pos (S,); return the whole cache."""
        if input_pos.shape[0] != k_val.shape[2]:
            raise ValueError(f"{input_pos.shape[0]} positions for {k_val.shape[2]} keys")
        self.k_cache[:, :, input_pos] = k_val
        self.v_cache[:, :, input_pos] = v_val
        return self.k_cache, self.v_cache


class RMSNorm(nn.Module):
    """gpt-fast's own RMSNorm: normalised in fp32, cast back to x's dtype, then scaled."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def precompute_freqs_cis(seq_len: int, n_elem: int, base: float, dtype: torch.dtype) -> Tensor:
    """(seq_len, n_elem/2, 2): cos and sin of p·θ_j, θ_j = base^(-2j/n_elem), computed in fp32
    and stored in dtype (the weights' dtype: bf16 on CUDA)."""
    inv_freq = 1.0 / base ** (torch.arange(0, n_elem, 2)[: n_elem // 2].float() / n_elem)
    angles = torch.outer(torch.arange(seq_len, device=inv_freq.device), inv_freq)
    unit = torch.polar(torch.ones_like(angles), angles)
    return torch.stack([unit.real, unit.imag], dim=-1).to(dtype=dtype)


def apply_rotary_emb(x: Tensor, freqs_cis: Tensor) -> Tensor:
    """Rotate the interleaved pairs (x_2j, x_2j+1) of x (B, S, H, D) by freqs_cis (S, D/2, 2)."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    rot = freqs_cis.view(1, pairs.size(1), 1, pairs.size(3), 2)
    a, b = pairs[..., 0], pairs[..., 1]
    cos, sin = rot[..., 0], rot[..., 1]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_head, self.n_local_heads = args.n_head, args.n_local_heads
        self.head_dim, self.dim = args.head_dim, args.dim
        qkv_rows = (args.n_head + 2 * args.n_local_heads) * args.head_dim
        self.wqkv = nn.Linear(args.dim, qkv_rows, bias=False)  # q, k, v in one matmul
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.kv_cache: KVCache | None = None

    def forward(self, x: Tensor, freqs_cis: Tensor, mask: Tensor, input_pos: Tensor) -> Tensor:
        bsz, seqlen, _ = x.shape
        kv_size = self.n_local_heads * self.head_dim
        q, k, v = self.wqkv(x).split([self.dim, kv_size, kv_size], dim=-1)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim)
        k = k.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        v = v.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        q, k = apply_rotary_emb(q, freqs_cis), apply_rotary_emb(k, freqs_cis)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(input_pos, k, v)
        group = self.n_head // self.n_local_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
        return self.wo(y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim))


class FeedForward(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.w1 = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.w3 = nn.Linear(args.dim, args.intermediate_size, bias=False)
        self.w2 = nn.Linear(args.intermediate_size, args.dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)

    def forward(self, x: Tensor, input_pos: Tensor, freqs_cis: Tensor, mask: Tensor) -> Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layer))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        # plain attributes, not buffers, as in gpt-fast
        self.freqs_cis: Tensor | None = None
        self.causal_mask: Tensor | None = None
        self.max_batch_size = self.max_seq_length = -1

    def setup_caches(self, max_batch_size: int, max_seq_length: int) -> None:
        """Caches for max_batch_size rows of max_seq_length positions (rounded up to a multiple
        of 8); kept as they are when the ones there are large enough."""
        if self.max_seq_length >= max_seq_length and self.max_batch_size >= max_batch_size:
            return
        args = self.config
        max_seq_length = find_multiple(max_seq_length, 8)
        self.max_seq_length, self.max_batch_size = max_seq_length, max_batch_size
        dtype, device = self.output.weight.dtype, self.output.weight.device
        with torch.device(device):
            for layer in self.layers:
                layer.attention.kv_cache = KVCache(
                    max_batch_size, max_seq_length, args.n_local_heads, args.head_dim, dtype
                )
            self.freqs_cis = precompute_freqs_cis(
                args.block_size, args.head_dim, args.rope_base, dtype
            )
            self.causal_mask = torch.tril(
                torch.ones(max_seq_length, max_seq_length, dtype=torch.bool)
            )

    def forward(self, idx: Tensor, input_pos: Tensor) -> Tensor:
        """idx (B, S) at positions input_pos (S,) → logits (B, S, vocab_size)."""
        if self.freqs_cis is None:
            raise ValueError("no caches: call setup_caches(max_batch_size, max_seq_length) first")
        mask = self.causal_mask[None, None, input_pos]
        freqs_cis = self.freqs_cis[input_pos]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, input_pos, freqs_cis, mask)
        return self.output(self.norm(x))


# --- the course's weights in gpt-fast's form -------------------------------------------------


def interleave_rope_rows(w: Tensor, n_heads: int, head_dim: int) -> Tensor:
    """Rows of a query or key projection (n_heads·head_dim, d_model), reordered inside each
    head so that the course's RoPE pair (j, j + D/2) lands at gpt-fast's (2j, 2j + 1)."""
    half = head_dim // 2
    order = torch.stack([torch.arange(half), torch.arange(half) + half], dim=-1).flatten()
    return w.view(n_heads, head_dim, -1)[:, order.to(w.device)].reshape(n_heads * head_dim, -1)


def course_projections(block, cfg) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """wq, wk, wv, w1, w3 of one course block, from its fused attn.wqkv (rows q, then k, then
    v) and ffn.w13 (rows w1, then w3)."""
    q_rows, kv_rows = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    wq, wk, wv = block.attn.wqkv.weight.split([q_rows, kv_rows, kv_rows])
    w1, w3 = block.ffn.w13.weight.split([cfg.ffn_hidden, cfg.ffn_hidden])
    return wq, wk, wv, w1, w3


def compute_dtype(model) -> torch.dtype:
    """The dtype the course computes in: bf16 on CUDA for fp32 weights (fp16 where the GPU
    has no bf16, as generation.autocast), else the weights' own dtype (fp32 on the CPU)."""
    p = next(model.parameters())
    if p.device.type == "cuda" and p.dtype == torch.float32:
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return p.dtype


@torch.no_grad()
def from_course(model, dtype: torch.dtype | None = None) -> Transformer:
    """gpt-fast's Transformer holding a course Transformer's weights, on its device, in dtype
    (default: compute_dtype(model)), in eval mode. The course model is left untouched."""
    cfg = model.cfg
    args = ModelArgs(
        block_size=cfg.max_seq_len,
        vocab_size=cfg.vocab_size,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        dim=cfg.d_model,
        intermediate_size=cfg.ffn_hidden,
        n_local_heads=cfg.n_kv_heads,
        rope_base=cfg.rope_theta,
        norm_eps=model.norm.eps,
    )
    state = {
        "tok_embeddings.weight": model.tok_emb.weight,
        "norm.weight": model.norm.weight,
        "output.weight": model.lm_head.weight,
    }
    for i, block in enumerate(model.blocks):
        wq, wk, wv, w1, w3 = course_projections(block, cfg)
        wq = interleave_rope_rows(wq, cfg.n_heads, cfg.head_dim)
        wk = interleave_rope_rows(wk, cfg.n_kv_heads, cfg.head_dim)
        state |= {
            f"layers.{i}.attention.wqkv.weight": torch.cat([wq, wk, wv]),
            f"layers.{i}.attention.wo.weight": block.attn.wo.weight,
            f"layers.{i}.feed_forward.w1.weight": w1,
            f"layers.{i}.feed_forward.w3.weight": w3,
            f"layers.{i}.feed_forward.w2.weight": block.ffn.w2.weight,
            f"layers.{i}.attention_norm.weight": block.attn_norm.weight,
            f"layers.{i}.ffn_norm.weight": block.ffn_norm.weight,
        }
    with torch.device("meta"):  # as generate.py's _load_model: build empty, then assign
        gf = Transformer(args)
    gf.load_state_dict({k: v.detach().clone() for k, v in state.items()}, assign=True)
    return gf.to(device=model.lm_head.weight.device, dtype=dtype or compute_dtype(model)).eval()


# --- generate.py ---------------------------------------------------------------------------


def multinomial_sample_one_no_sync(probs: Tensor) -> Tensor:
    """One draw per row of probs with no host sync: the argmax of probs / Exp(1) noise, int32."""
    noise = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / noise, dim=-1, keepdim=True).to(dtype=torch.int)


def logits_to_probs(logits: Tensor, temperature: float = 1.0, top_k: int | None = None) -> Tensor:
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[..., -1:]
        logits = torch.where(logits < kth, -float("inf"), logits)
    return F.softmax(logits, dim=-1)


def sample(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None
) -> tuple[Tensor, Tensor]:
    """logits (B, S, V) → next ids (B, 1) int32 from the last position, and their probs (B, V)."""
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    return multinomial_sample_one_no_sync(probs), probs


def prefill(model: Transformer, x: Tensor, input_pos: Tensor, **sampling_kwargs) -> Tensor:
    return sample(model(x, input_pos), **sampling_kwargs)[0]


def decode_one_token(
    model: Transformer, x: Tensor, input_pos: Tensor, **sampling_kwargs
) -> tuple[Tensor, Tensor]:
    """x (B, 1) at input_pos (1,) → next ids (B, 1), probs (B, V). generate.py compiles this."""
    if input_pos.shape[-1] != 1:
        raise ValueError(f"decode_one_token takes one position, got {input_pos.shape[-1]}")
    return sample(model(x, input_pos), **sampling_kwargs)


def model_forward(model: Transformer, x: Tensor, input_pos: Tensor) -> Tensor:
    return model(x, input_pos)


def compile_decode(mode: str = "reduce-overhead"):
    """generate.py's speed-up, in its one line."""
    return torch.compile(decode_one_token, mode=mode, fullgraph=True)


def decode_next(
    decode, model: Transformer, cur_token: Tensor, input_pos: Tensor, **sampling_kwargs
) -> tuple[Tensor, Tensor]:
    """One pass of generate.py's decode loop: decode (decode_one_token, compiled or not) under
    its SDPA backends, input_pos += 1 on the device, and copies of the token and probs, since
    a CUDA graph's outputs are overwritten by its next replay."""
    with sdpa_kernel(GENERATE_PY_SDPA):
        next_token, next_prob = decode(model, cur_token, input_pos, **sampling_kwargs)
        input_pos += 1
    return next_token.clone(), next_prob.clone()


def decode_n_tokens(
    decode,
    model: Transformer,
    cur_token: Tensor,
    input_pos: Tensor,
    num_new_tokens: int,
    callback=None,
    **sampling_kwargs,
) -> tuple[list[Tensor], list[Tensor]]:
    """num_new_tokens passes of decode_next, each fed the token of the one before; the new
    tokens and their probs, as lists. callback(token) after each."""
    new_tokens, new_probs = [], []
    for _ in range(num_new_tokens):
        cur_token, prob = decode_next(decode, model, cur_token, input_pos, **sampling_kwargs)
        new_tokens.append(cur_token)
        new_probs.append(prob)
        if callback is not None:
            callback(cur_token)
    return new_tokens, new_probs


# --- Inductor settings, restored ----------------------------------------------------------


def _resolve(settings: dict) -> list[tuple[object, str, object]]:
    """(owner, name, value) per dotted torch._inductor.config key; ValueError on unknown keys."""
    out = []
    for key, value in settings.items():
        *parents, name = key.split(".")
        owner = torch._inductor.config
        for part in parents:  # "triton.enable_pdl": the triton section, then its entry
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, name):
            raise ValueError(
                f"unknown Inductor setting {key!r}: torch {torch.__version__} has no "
                f"torch._inductor.config.{key}"
            )
        out.append((owner, name, value))
    return out


@contextlib.contextmanager
def inductor_settings(settings: dict):
    """Set torch._inductor.config entries ("triton.unique_kernel_names": True, ...) for the
    duration, then put the previous values back. Every key is checked before any is set."""
    resolved = _resolve(settings)
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in resolved]
    try:
        for owner, name, value in resolved:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


# --- steps for the bench -------------------------------------------------------------------


def _check_args(model, idx, max_new_tokens, temperature, top_k, extra_inductor) -> None:
    check_ids(idx, model.cfg.vocab_size, next(model.parameters()).device)
    if idx.dim() != 2 or idx.numel() == 0:
        raise ValueError(f"idx must be a non-empty (B, T), got shape {tuple(idx.shape)}")
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    T, block_size = idx.shape[1], model.cfg.max_seq_len
    if T + max_new_tokens > block_size:
        raise ValueError(
            f"prompt length {T} + max_new_tokens {max_new_tokens} = "
            f"{T + max_new_tokens} > block_size {block_size}"
        )
    if not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1, got {top_k!r}")
    _resolve(extra_inductor or {})


def _prepared_step(run, model, idx, max_new_tokens, settings):
    """Prefill idx into gpt-fast's model, warm run(tok) up under the Inductor settings (it
    compiles and records there), rewind, and wrap it in the guards of a bench step."""
    B, T = idx.shape
    input_pos = torch.tensor([T], device=idx.device, dtype=torch.int)
    with torch.no_grad():
        model.setup_caches(
            max_batch_size=B, max_seq_length=min(T + max_new_tokens, model.config.block_size)
        )
        first = prefill(model, idx, torch.arange(0, T, device=idx.device)).clone()  # (B, 1) int32
        with inductor_settings(settings):
            for _ in range(WARMUP_CALLS):  # each at position T: a short cache has no room past it
                input_pos.fill_(T)
                run(first, input_pos)
    input_pos.fill_(T)  # the first step writes position T again, over the warm-up's keys
    n_taken = 0

    def step(tok: Tensor):
        nonlocal n_taken
        if n_taken == max_new_tokens:
            raise ValueError(
                f"step {n_taken + 1} would write position {T + n_taken}, past the "
                f"cache: prompt length {T} + max_new_tokens {max_new_tokens}"
            )
        if tok.dtype != torch.int32 or tok.shape != (B, 1) or tok.device != idx.device:
            raise ValueError(
                f"tok must be int32 (B, 1) = ({B}, 1) on {idx.device}, as sample() "
                f"returns it (another dtype would recompile), got {tok.dtype} "
                f"{tuple(tok.shape)} on {tok.device}"
            )
        n_taken += 1
        with torch.no_grad():
            return run(tok, input_pos)

    return step


def _clock() -> float:
    """Host seconds, once the GPU (if any) has finished the work queued so far."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def make_decode_step(
    model,
    idx: Tensor,
    max_new_tokens: int,
    *,
    compile_mode: str | None = "reduce-overhead",
    temperature: float = TEMPERATURE,
    top_k: int | None = TOP_K,
    extra_inductor: dict | None = None,
):
    """gpt-fast verbatim: prefill idx (B, T) into gpt-fast's form of the course model, then
    step(tok) runs one pass of generate.py's decode loop (decode_one_token compiled with
    torch.compile(mode=compile_mode, fullgraph=True); None: not compiled) at the next position
    and returns what the loop keeps, (next token (B, 1) int32, probs (B, V)). tok is (B, 1)
    int32, as sample() returns it: a bench feeding a prompt token passes idx[:, -1:].int().

    step may be called max_new_tokens times, then raises: the cache is the one generate.py
    sizes for max_new_tokens new tokens (it feeds back only max_new_tokens - 1 of them).
    Inductor: generate.py's settings, then extra_inductor (e.g. {"max_autotune": True}); they
    hold while the step compiles and records, during setup. Returns (step, setup_s), setup_s
    covering conversion, prefill, compile and warm-up.

    Build steps from different models with torch._dynamo.reset() between them, as
    bench.measure_fusion does: compiled decode_one_token is shared by all of them."""
    _check_args(model, idx, max_new_tokens, temperature, top_k, extra_inductor)
    t0 = _clock()
    gf = from_course(model)
    decode = decode_one_token if compile_mode is None else compile_decode(compile_mode)

    def run(tok: Tensor, input_pos: Tensor) -> tuple[Tensor, Tensor]:
        return decode_next(decode, gf, tok, input_pos, temperature=temperature, top_k=top_k)

    step = _prepared_step(
        run, gf, idx, max_new_tokens, GENERATE_PY_INDUCTOR | (extra_inductor or {})
    )
    return step, _clock() - t0


def make_forward_step(
    model,
    idx: Tensor,
    max_new_tokens: int,
    *,
    compile_mode: str | None = "reduce-overhead",
    extra_inductor: dict | None = None,
):
    """Like make_decode_step, but only the model forward is compiled (generate.py's
    model_forward, under the same mode and settings): step(tok) → logits (B, 1, V), with no
    sampling, as the course's own step returns them. Not gpt-fast verbatim: generate.py
    compiles model_forward only for speculative decoding. The logits are valid until the
    next call (a CUDA graph's output buffer)."""
    _check_args(model, idx, max_new_tokens, 0.0, None, extra_inductor)
    t0 = _clock()
    gf = from_course(model)
    forward = (
        model_forward
        if compile_mode is None
        else torch.compile(model_forward, mode=compile_mode, fullgraph=True)
    )

    def run(tok: Tensor, input_pos: Tensor) -> Tensor:
        with sdpa_kernel(GENERATE_PY_SDPA):
            logits = forward(gf, tok, input_pos)
            input_pos += 1
        return logits

    step = _prepared_step(
        run, gf, idx, max_new_tokens, GENERATE_PY_INDUCTOR | (extra_inductor or {})
    )
    return step, _clock() - t0
