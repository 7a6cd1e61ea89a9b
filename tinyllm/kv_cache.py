"""Keeping keys and values between decode steps.

The cache protocol (see model.py) has three calls: begin_step(T, rope) → (cos, sin) and
sets the attention mask, layer(i).update(k, v) → the keys and values to attend over, and
end_step(T). Two caches live here:

- KVCache: the dynamic cache of eager decode. Each step appends, so every shape grows by
  one per token. Simple and exact, but a CUDA graph cannot replay it (graphs.py).
- SlotKVCache: the continuous-batching cache. A fixed number of slots, each holding one
  request at its own length, all decoded together in one batch (engine.py).

Every mask here is a boolean "may attend" tensor for F.scaled_dot_product_attention. No
row is ever all False: SDPA returns NaN for such a row, and the NaN then spreads through
the cache. A pad (or free) row attends at least to itself.
"""

import torch
from torch import Tensor


def causal_kwargs(offset: int, T: int, device) -> dict:
    """SDPA arguments for T queries at positions offset..offset+T-1 over keys 0..offset+T-1."""
    if T == 1:
        return {}  # one query attends to every key there is
    if offset == 0:
        return {"is_causal": True}
    q_pos = torch.arange(offset, offset + T, device=device)[:, None]
    k_pos = torch.arange(offset + T, device=device)[None, :]
    return {"attn_mask": k_pos <= q_pos}


def padded_causal_mask(offset: int, T: int, first_valid: Tensor) -> Tensor:
    """(B, 1, T, offset+T) mask for left-padded rows: row b's real tokens start at
    first_valid[b]. A query attends to keys at or before it that are not pads; a pad
    query attends to itself alone, so its row is never empty."""
    device = first_valid.device
    q_pos = torch.arange(offset, offset + T, device=device)[:, None]
    k_pos = torch.arange(offset + T, device=device)[None, :]
    real = k_pos >= first_valid[:, None, None]  # (B, 1, offset+T)
    mask = (k_pos <= q_pos) & (real | (k_pos == q_pos))
    return mask[:, None]


class KVCache:
    """Dynamic cache: each layer's K/V grow by T along the sequence axis at every step.

    first_valid (B,) is the number of left pads per row (None: no pads)."""

    def __init__(self, n_layers: int, first_valid: Tensor | None = None):
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.first_valid = first_valid
        self.n = 0  # positions written so far
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        cos, sin = rope(T, self.n)
        if self.first_valid is None:
            self.attn_kwargs = causal_kwargs(self.n, T, cos.device)
        else:
            self.attn_kwargs = {"attn_mask": padded_causal_mask(self.n, T, self.first_valid)}
        return cos, sin

    def layer(self, i: int) -> "LayerKV":
        return LayerKV(self, i)

    def end_step(self, T: int) -> None:
        self.n += T


class LayerKV:
    """One layer's view of a KVCache."""

    def __init__(self, cache: KVCache, i: int):
        self.cache, self.i = cache, i
        self.attn_kwargs = cache.attn_kwargs

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c, i = self.cache, self.i
        c.k[i] = k if c.k[i] is None else torch.cat([c.k[i], k], dim=2)
        c.v[i] = v if c.v[i] is None else torch.cat([c.v[i], v], dim=2)
        return c.k[i], c.v[i]


class SlotKVCache:
    """n_slots rows of max_len positions; each slot holds one request at its own length.

    - Prefill: admit(slot, T), then one model call on that slot's prompt (1, T) writes its
      positions 0..T-1. No pads: each prompt is prefilled alone.
    - Decode (`window` set, T=1): all n_slots rows at once. Row b writes its new K/V at
      position lens_dev[b] and attends to keys 0..lens_dev[b] of the first `window`;
      free rows compute too (they attend to key 0 alone) but do not advance.

    lens (host list) and lens_dev (device) hold each slot's length and must agree. A decode
    step's end_step advances only lens_dev (device work, which a CUDA graph can replay), so
    the decoder calls advance_host() after every decode step, replayed or eager.
    """

    def __init__(self, n_layers: int, n_slots: int, max_len: int, device):
        if not isinstance(n_slots, int) or n_slots < 1:
            raise ValueError(f"n_slots must be an int >= 1, got {n_slots!r}")
        if not isinstance(max_len, int) or max_len < 1:
            raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")
        self.n_layers, self.n_slots, self.max_len = n_layers, n_slots, max_len
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.lens = [0] * n_slots
        self.active = [False] * n_slots
        self.lens_dev = torch.zeros(n_slots, dtype=torch.long, device=device)
        self.active_dev = torch.zeros(n_slots, dtype=torch.long, device=device)
        self.window: int | None = None
        self.prefill_slot: int | None = None
        self.attn_kwargs: dict = {}

    def free_slots(self) -> list[int]:
        return [s for s in range(self.n_slots) if not self.active[s]]

    def admit(self, slot: int, T: int) -> None:
        """Reserve a free slot for a prompt of T tokens; the next model call prefills it."""
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} outside [0, {self.n_slots})")
        if self.active[slot]:
            raise ValueError(f"slot {slot} is in use")
        if not 1 <= T <= self.max_len:
            raise ValueError(f"prompt length {T} outside [1, max_len {self.max_len}]")
        self.prefill_slot = slot

    def release(self, slot: int) -> None:
        if not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} outside [0, {self.n_slots})")
        self.active[slot] = False
        self.lens[slot] = 0
        self.active_dev[slot] = 0
        self.lens_dev[slot] = 0

    def advance_host(self) -> None:
        """Advance the host lengths of active slots, as end_step does on the device."""
        for s in range(self.n_slots):
            self.lens[s] += self.active[s]

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        if self.window is None:
            if self.prefill_slot is None:
                raise ValueError("call admit(slot, T) before prefilling a slot")
            cos, sin = rope(T, 0)
            self.attn_kwargs = causal_kwargs(0, T, cos.device)
            return cos, sin
        if T != 1:
            raise ValueError(f"decode takes one token per slot, got T={T}")
        k_pos = torch.arange(self.window, device=self.lens_dev.device)
        self.attn_kwargs = {"attn_mask": (k_pos <= self.lens_dev[:, None])[:, None, None, :]}
        # each slot at its own position: per-row cos/sin, shape (n_slots, 1, D/2)
        return rope.cos[self.lens_dev][:, None], rope.sin[self.lens_dev][:, None]

    def layer(self, i: int) -> "SlotLayerKV":
        return SlotLayerKV(self, i)

    def end_step(self, T: int) -> None:
        if self.window is None:
            s, self.prefill_slot = self.prefill_slot, None
            self.lens[s], self.active[s] = T, True
            self.lens_dev[s], self.active_dev[s] = T, 1
        else:
            # device work only, so that a graph (or torch.compile) can hold it; the
            # decoder advances the host lengths after every decode step: advance_host()
            self.lens_dev.add_(self.active_dev)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


class SlotLayerKV:
    def __init__(self, cache: SlotKVCache, i: int):
        self.cache, self.i = cache, i
        self.attn_kwargs = cache.attn_kwargs

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c, i = self.cache, self.i
        _, H, T, D = k.shape
        if c.k[i] is None:
            shape = (c.n_slots, H, c.max_len, D)
            c.k[i] = torch.zeros(shape, dtype=k.dtype, device=k.device)
            c.v[i] = torch.zeros(shape, dtype=v.dtype, device=v.device)
        elif c.k[i].dtype != k.dtype:
            raise ValueError(f"cache holds {c.k[i].dtype}, got {k.dtype}")
        if c.window is None:
            s = c.prefill_slot
            c.k[i][s, :, :T] = k[0]
            c.v[i][s, :, :T] = v[0]
            return c.k[i][s:s + 1, :, :T], c.v[i][s:s + 1, :, :T]
        # decode: row b writes at its own position lens_dev[b]
        where = c.lens_dev.view(-1, 1, 1, 1).expand(-1, H, 1, D)
        c.k[i].scatter_(2, where, k)
        c.v[i].scatter_(2, where, v)
        return c.k[i][:, :, :c.window], c.v[i][:, :, :c.window]
