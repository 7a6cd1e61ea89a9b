"""A Llama-style decoder, read top to bottom in the order data meets it.

embedding → n_layers × [RMSNorm → attention (RoPE, grouped-query, SDPA) → RMSNorm → SwiGLU]
→ final RMSNorm → LM head.

The model knows nothing about how keys and values are kept between calls: that is the
cache's job. With a cache, each forward call follows the cache protocol (kv_cache.py says
it once): cache.begin_step(T, rope) gives the RoPE rows and sets the mask, each layer calls
cache.layer(i).update(k, v) and attends with its attn_kwargs (the paged decode step does
both in one op, rope_write_attend), and cache.end_step(T) advances the position. Without a
cache the model runs the plain causal forward over positions 0..T-1.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tinyllm.config import ModelConfig
from tinyllm.projections import (
    combine_project_add,
    decode_rows,
    norm_project,
    norm_swiglu,
    project_add,
)
from tinyllm.validate import LIMITS, validate_ids, validate_size


class Rope(nn.Module):
    """Rotary position embedding tables: row p holds cos/sin of p·θ_j, j < head_dim/2."""

    def __init__(self, head_dim: int, max_seq_len: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, T: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        if offset + T > self.cos.shape[0]:
            raise ValueError(f"position {offset + T} > max_seq_len {self.cos.shape[0]}")
        return self.cos[offset : offset + T], self.sin[offset : offset + T]


def widen(cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """RoPE rows (..., D/2) widened to the whole head, once per step: (cos, cos) and
    (-sin, sin), so that apply_rope is one multiply and one multiply-add per layer."""
    return torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the pairs (x_j, x_{j+D/2}) of x (B, T, heads, D) by the angles in the widened
    rows cos, sin (T, D) or, per row, (B, T, D):
    (x_j, x_{j+D/2}) → (x_j cos - x_{j+D/2} sin, x_{j+D/2} cos + x_j sin)."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # the same angles for every head
    x1, x2 = x.chunk(2, dim=-1)
    return torch.addcmul(x * cos, torch.cat([x2, x1], dim=-1), sin)


def attend(q: Tensor, k: Tensor, v: Tensor, attn_kwargs: dict) -> Tensor:
    """Grouped-query SDPA: q (B, H, T, D) over k, v (B, H_kv, S, D), G = H / H_kv query heads
    per K/V head; returns (B, T, H·D), the heads side by side for wo.

    With one query per row (decode), each K/V head and the G query heads that share it
    become a batch row of their own, with G queries: (B·H_kv, 1, G, D) over (B·H_kv, 1, S, D),
    all views. The heads then match without copying the cache, a fused kernel takes the
    step's mask (one row per K/V head, (B·H_kv, 1, 1, S), as the static and slot caches keep
    it), and its output is already in head order. (On CUDA, SDPA has no fused kernel for a
    mask together with enable_gqa, and falls back to its unfused MATH path.)"""
    B, H, T, D = q.shape
    H_kv = k.shape[1]
    if T > 1:
        y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **attn_kwargs)
        return y.transpose(1, 2).reshape(B, T, H * D)
    mask = attn_kwargs.get("attn_mask")
    if mask is not None and mask.shape[0] != B * H_kv:  # a (B, 1, 1, S) mask: once per head
        mask = mask.repeat_interleave(H_kv, dim=0)
    q, k, v = (
        q.reshape(B * H_kv, 1, H // H_kv, D),
        k.reshape(B * H_kv, 1, -1, D),
        v.reshape(B * H_kv, 1, -1, D),
    )
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return y.reshape(B, 1, H * D)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        # queries, keys and values in one GEMM: rows for H query heads, then H_kv key heads,
        # then H_kv value heads
        qkv_dim = (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.head_dim
        self.wqkv = nn.Linear(cfg.d_model, qkv_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, kv=None) -> Tensor:
        B, T, _ = x.shape
        H, H_kv, D = self.n_heads, self.n_kv_heads, self.head_dim
        qkv = self.wqkv(x).view(B, T, H + 2 * H_kv, D)
        if kv is not None and kv.fused:  # the paged decode step: RoPE, write, attend in one op
            y = kv.rope_write_attend(qkv[:, 0], cos, sin, H_kv)
            return self.wo(y.reshape(B, T, H * D))
        qk = apply_rope(qkv[:, :, : H + H_kv], cos, sin)  # queries and keys in one pass
        q, k, v = (t.transpose(1, 2) for t in (qk[:, :, :H], qk[:, :, H:], qkv[:, :, H + H_kv :]))
        if kv is None:
            attn_kwargs = {"is_causal": True}
        else:
            k, v = kv.update(k, v)
            attn_kwargs = kv.attn_kwargs
        return self.wo(attend(q, k, v, attn_kwargs))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(gate) * up), with gate and up from one GEMM, w13 (the rows of w1,
    then those of w3)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w13 = nn.Linear(cfg.d_model, 2 * cfg.ffn_hidden, bias=False)
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.attn = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.ffn = FeedForward(cfg)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, kv=None) -> Tensor:
        if kv is not None and kv.fused and decode_rows(x):
            return self.decode(x, cos, sin, kv)
        x = x + self.attn(self.attn_norm(x), cos, sin, kv)
        return x + self.ffn(self.ffn_norm(x))

    def decode(self, x: Tensor, cos: Tensor, sin: Tensor, kv) -> Tensor:
        """The same layer in the paged decode step of a few rows, x (B, 1, d_model): five
        ops, each one kernel on CUDA up to FOLD_ROWS rows, the norms and the adds inside the
        matrix products, and the attention's combine inside the output projection (past
        FOLD_ROWS the combine is a kernel of its own: projections.py)."""
        a, B = self.attn, x.shape[0]
        x = x.view(B, -1)
        qkv = norm_project(x, self.attn_norm.weight, a.wqkv.weight, self.attn_norm.eps)
        qkv = qkv.view(B, a.n_heads + 2 * a.n_kv_heads, a.head_dim)
        splits = kv.rope_write_splits(qkv, cos, sin, a.n_kv_heads)  # (part, max, sum)
        x = combine_project_add(*splits, a.wo.weight, x)
        h = norm_swiglu(x, self.ffn_norm.weight, self.ffn.w13.weight, self.ffn_norm.eps)
        return project_add(h, self.ffn.w2.weight, x).view(B, 1, -1)


class Transformer(nn.Module):
    """The whole model. cfg is held to the course's limits (validate.Limits) before a weight
    is made; pass limits=Limits(...) to build a larger one."""

    def __init__(self, cfg: ModelConfig, limits=LIMITS):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise ValueError(f"cfg must be a ModelConfig, got {type(cfg).__name__}")
        validate_size(cfg, limits)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rope = Rope(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, cache=None, check: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids → logits (B, T, vocab_size), and the mean cross-entropy in
        nats per token when targets (B, T) are given. check=False skips the check of the
        ids (a host read, which a CUDA graph cannot hold): generation and the decoders check
        them before they call the model."""
        if not isinstance(idx, Tensor) or idx.dim() != 2:
            got = tuple(idx.shape) if isinstance(idx, Tensor) else type(idx).__name__
            raise ValueError(f"idx must be (B, T), got shape {got}")
        if check:
            validate_ids(idx, self.cfg.vocab_size, self.tok_emb.weight.device)
        if idx.dtype not in (torch.int32, torch.int64):  # the embedding takes only these two
            idx = idx.long()
        B, T = idx.shape
        x = self.tok_emb(idx)
        cos, sin = self.rope(T, 0) if cache is None else cache.begin_step(T, self.rope)
        fused = cache is not None and cache.layer(0).fused  # the paged decode step
        if not fused:  # its kernel reads RoPE's tables at each row's position, and widens
            cos, sin = widen(cos, sin)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, None if cache is None else cache.layer(i))
        if cache is not None:
            cache.end_step(T)
        if fused and decode_rows(x):  # the norm inside the head's kernel
            logits = norm_project(x.view(B, -1), self.norm.weight, self.lm_head.weight,
                                  self.norm.eps).view(B, 1, -1)  # fmt: skip
        else:
            logits = self.lm_head(self.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(B * T, -1), targets.reshape(B * T))
        return logits, loss
