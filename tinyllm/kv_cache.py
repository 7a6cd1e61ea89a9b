"""Keeping keys and values between decode steps (notebooks 02 and 06).

The model drives a cache through the cache protocol (`Cache` below, and model.py):

    cos, sin = cache.begin_step(T, rope)   # RoPE rows for these T positions; sets the mask
    for each layer i:
        k, v = cache.layer(i).update(k, v)  # store the new keys, get back the keys to attend
        attend with **cache.layer(i).attn_kwargs
    cache.end_step(T)                      # advance the position (device work only in decode)

Three caches follow it:

- KVCache: the dynamic cache of eager decode. Each step appends, so every shape grows by
  one per token. Simple and exact, but a CUDA graph cannot replay it (notebook 02).
- StaticKVCache: fixed shapes for graph decode. The position is the device tensor `pos`,
  K/V are written with index_copy_ at it, and a decode step attends over a fixed `window`
  of keys with the later ones masked (graphs.py replays that step).
- SlotKVCache: the continuous-batching cache. A fixed number of slots, each holding one
  request at its own length, all decoded together in one batch (engine.py).

A static or slot cache is in decode mode inside `with cache.decoding(window):`, and in
prefill mode outside it. Its positions exist twice: on the device (`pos`, `lens_dev`),
which the kernels read, and on the host (`n`, `lens`), which picks the window without a
device read. A decode step's end_step moves only the device copy, so that a CUDA graph can
hold it; the caller then calls advance_host(). snapshot()/restore() save and put back the
positions (never K/V): the host copy is the truth between steps, and restore() rewrites the
device copy from it.

Masks. window_mask and slot_mask define which keys a decode step attends to (True = may
attend). The static and slot caches keep that mask on the device too, as an additive bias
(0 where attended, -inf where masked) in the dtype of their keys, one row per K/V head:
prefill (or admission) sets it from window_mask / slot_mask, and each decode step opens
one key, its own, with one kernel, so that every layer hands SDPA the same tensor and no
kernel rebuilds it. No row is ever fully masked: a pad (or free) row attends at least to
itself, so no step depends on what SDPA returns for a fully masked row (notebook 02
measures it).
"""

import contextlib
from typing import Protocol

import torch
from torch import Tensor

from tinyllm.checks import check_int, is_int


class Cache(Protocol):
    """What the model calls on a cache (model.py); every cache here follows it."""

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]: ...

    def layer(self, i: int) -> "LayerKV": ...

    def end_step(self, T: int) -> None: ...

    def advance_host(self) -> None: ...


# --- masks ---------------------------------------------------------------------------------


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


def window_mask(pos, window: int, first_valid) -> Tensor:
    """(B, window) mask of the static decode step at position pos: keys at or before pos
    that are not left pads of the row (row b's real tokens start at first_valid[b]). The
    step's own key (pos) is never a pad, so no row is empty. pos: an int or a 1-element
    tensor (the cache's device position); first_valid: (B,) ints."""
    first_valid = torch.as_tensor(first_valid)
    k_pos = torch.arange(window, device=first_valid.device)
    return (k_pos <= torch.as_tensor(pos, device=first_valid.device)) & (
        k_pos >= first_valid[:, None]
    )


def slot_mask(lens, window: int) -> Tensor:
    """(n_slots, window) mask of the slot decode step: slot b attends to keys 0..lens[b]
    (its own new key is at lens[b]); a free slot (length 0) attends to key 0 alone."""
    lens = torch.as_tensor(lens)
    k_pos = torch.arange(window, device=lens.device)
    return k_pos <= lens[:, None]


def additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean mask as an additive one of the same shape: 0 where attended, -inf where
    masked."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
        ~mask, float("-inf")
    )


# --- the dynamic cache ---------------------------------------------------------------------


class KVCache:
    """Dynamic cache: each layer's K/V grow by T along the sequence axis at every step.

    first_valid (B,) is the number of left pads per row (None: no pads). Its position n
    lives on the host only, so end_step advances it and advance_host() has nothing to do."""

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

    def advance_host(self) -> None:
        pass


class LayerKV:
    """One layer's view of a cache: the step's attn_kwargs, and update(k, v). This one is a
    KVCache's, which grows by concatenation."""

    def __init__(self, cache: KVCache, i: int):
        self.cache, self.i = cache, i
        self.attn_kwargs = cache.attn_kwargs

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c, i = self.cache, self.i
        c.k[i] = k if c.k[i] is None else torch.cat([c.k[i], k], dim=2)
        c.v[i] = v if c.v[i] is None else torch.cat([c.v[i], v], dim=2)
        return c.k[i], c.v[i]


# --- fixed shapes: the static and the slot cache -------------------------------------------


class FixedCache:
    """What the static and the slot cache share: K/V buffers of fixed shape and the decode
    mask as a bias (rows, kv_heads, max_len), all allocated at the first write, and the decode
    mode."""

    def __init__(self, n_layers: int, rows: int, max_len: int):
        check_int("n_layers", n_layers)
        check_int("max_len", max_len)
        self.n_layers, self.max_len = n_layers, max_len
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.bias: Tensor | None = None
        self.rows = rows
        self.window: int | None = None  # set only inside decoding(window)
        self.attn_kwargs: dict = {}

    @contextlib.contextmanager
    def decoding(self, window: int):
        """Decode mode for the block: one token per row, attending over `window` keys."""
        if not isinstance(window, int) or not 1 <= window <= self.max_len:
            raise ValueError(f"window {window!r} outside [1, max_len {self.max_len}]")
        outer, self.window = self.window, window
        try:
            yield self
        finally:
            self.window = outer

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype, device) -> None:
        """Make every layer's K/V buffers (rows, kv_heads, max_len, head_dim) and the decode
        bias, which opens key 0 alone in every row until a prefill sets it. The decoders
        call it at construction, so that a graph can be captured before any prefill; else
        the first write makes them."""
        if self.k[0] is not None:
            return
        shape = (self.rows, kv_heads, self.max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(self.n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(self.n_layers)]
        self.bias = torch.full(shape[:3], float("-inf"), dtype=dtype, device=device)
        self.bias[..., 0] = 0.0

    def buffers(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Layer i's K/V buffers, made at the first write if allocate() has not made them."""
        self.allocate(k.shape[1], k.shape[3], k.dtype, k.device)
        if self.k[i].dtype != k.dtype:
            raise ValueError(f"cache holds {self.k[i].dtype}, got {k.dtype}")
        return self.k[i], self.v[i]

    def set_bias(self, rows, mask: Tensor) -> None:
        """Set the bias of some rows (an index or slice) from a boolean (rows, max_len) mask,
        the same for every K/V head."""
        self.bias[rows] = additive(mask, self.bias.dtype)[..., None, :]

    def decode_bias(self) -> Tensor:
        """The bias as the decode step's attn_mask: (rows · kv_heads, 1, 1, window), a view,
        one batch row per K/V head as model.attend folds them."""
        R, H_kv, L = self.bias.shape
        return self.bias.view(R * H_kv, 1, 1, L)[..., : self.window]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


class StaticKVCache(FixedCache):
    """Shared-position cache with fixed shapes (batch rows, max_len positions).

    - Prefill (outside decoding()): from position 0, as KVCache; writes and returns
      positions 0..T-1, then sets the decode bias to window_mask(T - 1).
    - Decode (inside decoding(window), T=1): the position is the device tensor `pos`; K/V
      are written with index_copy_ at pos, RoPE rows gathered with index_select at pos, key
      pos opened in the bias with index_fill_, and the first `window` keys returned, with
      keys past pos and pad keys masked. Nothing in the step depends on a host value of the
      position, so a CUDA graph can replay it.

    first_valid (B,) is the left-pad count per row (zeros when unpadded); n is the host
    copy of pos.
    """

    def __init__(self, n_layers: int, batch: int, max_len: int, device):
        check_int("batch", batch)
        super().__init__(n_layers, batch, max_len)
        self.batch = batch
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.first_valid = torch.zeros(batch, dtype=torch.long, device=device)
        self.pad_lens: list[int] | None = None  # host copy of first_valid, None: no pads
        self.n = 0

    @property
    def padded(self) -> bool:
        return self.pad_lens is not None

    def reset(self, pad_lens: Tensor | None = None) -> None:
        """Empty the cache for a new request, left-padded by pad_lens (B,) if given."""
        if pad_lens is not None:
            if not isinstance(pad_lens, Tensor) or pad_lens.shape != (self.batch,):
                raise ValueError(f"pad_lens must be a tensor of shape ({self.batch},)")
            pad_lens = pad_lens.tolist()
            if any(not is_int(p) or not 0 <= p < self.max_len for p in pad_lens):
                raise ValueError(f"pad_lens {pad_lens} outside [0, max_len {self.max_len})")
        self.restore({"n": 0, "pad_lens": pad_lens})

    def snapshot(self) -> dict:
        return {"n": self.n, "pad_lens": self.pad_lens}

    def restore(self, state: dict) -> None:
        """Put back the positions of a snapshot(), on the host and on the device (pos, the
        pads, and the decode bias that follows from them)."""
        self.n, self.pad_lens = state["n"], state["pad_lens"]
        self.pos.fill_(self.n)
        self.first_valid.copy_(torch.tensor(self.pad_lens or [0] * self.batch))
        if self.bias is not None:
            self.set_bias(slice(None), window_mask(self.n - 1, self.max_len, self.first_valid))

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        if self.window is None:
            if self.n != 0:
                raise ValueError(f"StaticKVCache prefills only from position 0, not {self.n}")
            cos, sin = rope(T, 0)
            self.attn_kwargs = (
                {"attn_mask": padded_causal_mask(0, T, self.first_valid)}
                if self.padded
                else causal_kwargs(0, T, cos.device)
            )
            return cos, sin
        if T != 1:
            raise ValueError(f"decode takes one token per row, got T={T}")
        self.bias.index_fill_(2, self.pos, 0.0)  # this step's own key joins the window
        self.attn_kwargs = {"attn_mask": self.decode_bias()}
        return rope.cos.index_select(0, self.pos), rope.sin.index_select(0, self.pos)

    def layer(self, i: int) -> "StaticLayerKV":
        return StaticLayerKV(self, i)

    def end_step(self, T: int) -> None:
        if self.window is None:
            self.n = T
            self.pos.fill_(T)
            self.set_bias(slice(None), window_mask(T - 1, self.max_len, self.first_valid))
        else:
            self.pos.add_(1)  # device work only: advance_host() moves n

    def advance_host(self) -> None:
        """After a decode step: move the host copy n as the step moved pos."""
        self.n += 1


class StaticLayerKV(LayerKV):
    """One layer's view of a StaticKVCache: writes at pos, reads the window."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c = self.cache
        ck, cv = c.buffers(self.i, k, v)
        if c.window is None:
            T = k.shape[2]
            if T > c.max_len:
                raise ValueError(f"KV cache full: position {T} > max_len {c.max_len}")
            ck[:, :, :T] = k
            cv[:, :, :T] = v
            return ck[:, :, :T], cv[:, :, :T]
        ck.index_copy_(2, c.pos, k)
        cv.index_copy_(2, c.pos, v)
        return ck[:, :, : c.window], cv[:, :, : c.window]


class SlotKVCache(FixedCache):
    """n_slots rows of max_len positions; each slot holds one request at its own length.

    - Prefill (outside decoding()): admit(slot, T), then one model call on that slot's
      prompt (1, T) writes its positions 0..T-1. No pads: each prompt is prefilled alone.
    - Decode (inside decoding(window), T=1): all n_slots rows at once. Row b writes its new
      K/V at position lens_dev[b], opens that key in its bias, and attends to keys
      0..lens_dev[b] of the first `window`; free rows compute too (they attend to key 0
      alone) but do not advance.

    lens (host) and lens_dev (device) hold each slot's length, active and active_dev whether
    it holds a request. A decode step's end_step advances only lens_dev; advance_host()
    then advances lens.
    """

    def __init__(self, n_layers: int, n_slots: int, max_len: int, device):
        check_int("n_slots", n_slots)
        super().__init__(n_layers, n_slots, max_len)
        self.n_slots = n_slots
        self.lens = [0] * n_slots
        self.active = [False] * n_slots
        self.lens_dev = torch.zeros(n_slots, dtype=torch.long, device=device)
        self.active_dev = torch.zeros(n_slots, dtype=torch.long, device=device)
        self.prefill_slot: int | None = None

    def free_slots(self) -> list[int]:
        return [s for s in range(self.n_slots) if not self.active[s]]

    def admit(self, slot: int, T: int) -> None:
        """Reserve a free slot for a prompt of T tokens; the next model call prefills it."""
        if not is_int(slot) or not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} outside [0, {self.n_slots})")
        if self.active[slot]:
            raise ValueError(f"slot {slot} is in use")
        if not is_int(T) or not 1 <= T <= self.max_len:
            raise ValueError(f"prompt length {T!r} outside [1, max_len {self.max_len}]")
        self.prefill_slot = slot

    def release(self, slot: int) -> None:
        if not is_int(slot) or not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot} outside [0, {self.n_slots})")
        self.active[slot] = False
        self.lens[slot] = 0
        self.active_dev[slot] = 0
        self.lens_dev[slot] = 0
        self.set_row_bias(slot)

    def set_row_bias(self, slot) -> None:
        """A slot's decode bias from its host length: keys 0..length-1 (a free slot: key 0)."""
        if self.bias is not None:
            last = max(self.lens[slot] - 1, 0)
            self.set_bias(slot, slot_mask(torch.tensor([last], device=self.bias.device),
                                          self.max_len)[0])  # fmt: skip

    def snapshot(self) -> dict:
        return {"lens": list(self.lens), "active": list(self.active),
                "prefill_slot": self.prefill_slot}  # fmt: skip

    def restore(self, state: dict) -> None:
        """Put back the positions of a snapshot(), on the host and on the device (lengths,
        active flags, and the decode bias that follows from them)."""
        self.lens, self.active = list(state["lens"]), list(state["active"])
        self.prefill_slot = state["prefill_slot"]
        self.lens_dev.copy_(torch.tensor(self.lens))
        self.active_dev.copy_(torch.tensor(self.active, dtype=torch.long))
        for s in range(self.n_slots):
            self.set_row_bias(s)

    def advance_host(self) -> None:
        """After a decode step: advance the host lengths of active slots, as end_step did
        on the device."""
        self.lens = [n + a for n, a in zip(self.lens, self.active)]

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        if self.window is None:
            if self.prefill_slot is None:
                raise ValueError("call admit(slot, T) before prefilling a slot")
            cos, sin = rope(T, 0)
            self.attn_kwargs = causal_kwargs(0, T, cos.device)
            return cos, sin
        if T != 1:
            raise ValueError(f"decode takes one token per slot, got T={T}")
        R, H_kv, _ = self.bias.shape  # each row opens its own new key, at lens_dev[b]
        self.bias.scatter_(2, self.lens_dev.view(R, 1, 1).expand(R, H_kv, 1), 0.0)
        self.attn_kwargs = {"attn_mask": self.decode_bias()}
        # each slot at its own position: per-row cos/sin, shape (n_slots, 1, D/2)
        return rope.cos[self.lens_dev][:, None], rope.sin[self.lens_dev][:, None]

    def layer(self, i: int) -> "SlotLayerKV":
        return SlotLayerKV(self, i)

    def end_step(self, T: int) -> None:
        if self.window is None:
            s, self.prefill_slot = self.prefill_slot, None
            self.lens[s], self.active[s] = T, True
            self.lens_dev[s], self.active_dev[s] = T, 1
            self.set_row_bias(s)
        else:
            self.lens_dev.add_(self.active_dev)  # device work only: advance_host() moves lens


class SlotLayerKV(LayerKV):
    """One layer's view of a SlotKVCache: each row writes at its own length."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c = self.cache
        ck, cv = c.buffers(self.i, k, v)
        if c.window is None:
            s, T = c.prefill_slot, k.shape[2]
            ck[s, :, :T] = k[0]
            cv[s, :, :T] = v[0]
            return ck[s : s + 1, :, :T], cv[s : s + 1, :, :T]
        # decode: row b writes at its own position lens_dev[b]
        H, D = k.shape[1], k.shape[3]
        where = c.lens_dev.view(-1, 1, 1, 1).expand(-1, H, 1, D)
        ck.scatter_(2, where, k)
        cv.scatter_(2, where, v)
        return ck[:, :, : c.window], cv[:, :, : c.window]
