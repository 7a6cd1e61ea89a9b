"""gpt-fast's model.py, written anew at the course model's shapes (see __init__.py), and the
course's weights in its form (from_course)."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


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
    has no bf16, as precision.compute_dtype), else the weights' own dtype (fp32 on the CPU)."""
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
