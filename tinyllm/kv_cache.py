"""Keeping keys and values between decode steps (notebooks 02 and 06).

The cache protocol, described once, here. In every forward call with a cache, the model
(model.py) calls:

    cos, sin = cache.begin_step(T, rope)   # RoPE rows for these T positions; the step's mask
    for each layer i:
        kv = cache.layer(i)
        k, v = kv.update(k, v)             # store the new keys, get back the keys to attend
        attend with **kv.attn_kwargs
    cache.end_step(T)                      # advance the position

A layer whose `kv.fused` is true does the middle two in one op instead, from the layer's
projections before RoPE: `kv.rope_write_attend(qkv, cos, sin, kv_heads)`, or
`kv.rope_write_splits(...)`, the same stopped before the combine of a row's splits (the model's
output projection combines them). Only the paged decode step does (paged.PagedDecode, one
kernel a layer on CUDA).

rope.cos / rope.sin are tables of max_seq_len rows and rope(T, offset) slices them. cos/sin
come back shared by all rows, shape (T, D/2), or per row, shape (B, T, D/2); the paged decode
step's come back whole, and its kernel reads each row's row. Without a cache the model runs
the plain causal forward.

Three caches:

- KVCache: the dynamic cache of eager decode. It follows the protocol itself: each call
  appends its T positions, so prefill and decode are one path and every shape grows by one
  per token. Simple and exact, but a CUDA graph cannot replay it (notebook 02).
- StaticKVCache: fixed shapes for graph decode, one shared position. The position is the
  device tensor `pos`; K/V are written with index_copy_ at it, and a decode step attends
  over a fixed `window` of keys with the later ones masked (graphs.py replays that step).
- SlotKVCache: the continuous-batching cache. A fixed number of slots, each holding one
  request at its own length, all decoded together in one batch (engine.py).

The two fixed caches hold buffers; what follows the protocol is a *step* they hand out, one
object per kind of model call, so prefill and decode are separate classes that read apart:

    model(idx, cache=static.prefilling())        model(idx, cache=slots.prefilling(slot))
    model(tok, cache=static.decoding(window))    model(tok, cache=slots.decoding(window))

Positions exist twice: on the device (`pos`, `lens_dev`), which the kernels read, and on the
host (`n`, `lens`), which picks the window without a device read. A decode step's end_step
moves only the device copy, so that a CUDA graph can hold it; the decoder then calls the
cache's advance_host(), after every step, eager or replayed. snapshot()/restore() save and put
back the positions (never K/V: what an undone step wrote lies past every length, and the
next step overwrites it); the host copy is the truth, and restore() rewrites the device copy
from it. transaction() is the one way a step is undone: the decoder opens it around a step.

Masks. window_mask and slot_mask define which keys a decode step attends to (True = may
attend). The fixed caches keep that mask on the device as an additive bias (0 where
attended, -inf where masked) in the dtype of their keys, one row per K/V head: prefill sets it
from window_mask / slot_mask, and each decode step opens one key, its own, with one kernel,
so every layer hands SDPA the same tensor and no kernel rebuilds it. No row is ever fully
masked: a pad (or free) row attends at least to itself, so no step depends on what SDPA
returns for a fully masked row (notebook 02 measures it).
"""

import contextlib
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from tinyllm.rows import OnRows, Rows
from tinyllm.validate import (
    LIMITS,
    Limits,
    is_int,
    signals_held,
    validate_device,
    validate_int,
    validate_limits,
    validate_pad_lens,
)


class Cache(Protocol):
    """What the model calls on a cache (model.py): KVCache, and the fixed caches' steps."""

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]: ...

    def layer(self, i: int) -> "LayerKV": ...

    def end_step(self, T: int) -> None: ...


class LayerKV:
    """Layer i's view of a step: update(k, v) stores this call's keys and values and returns
    the ones to attend over; attn_kwargs is the step's mask, the same for every layer."""

    def __init__(self, step, i: int):
        self.step, self.i = step, i

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return self.step.update(self.i, k, v)

    @property
    def attn_kwargs(self) -> dict:
        return self.step.attn_kwargs

    @property
    def fused(self) -> bool:
        """The step does RoPE, the write and the attention in one op from the projections
        (rope_write_attend, below) instead of update and attn_kwargs: the paged decode step."""
        return hasattr(self.step, "rope_write_attend")

    def rope_write_attend(self, qkv: Tensor, cos: Tensor, sin: Tensor, kv_heads: int) -> Tensor:
        return self.step.rope_write_attend(self.i, qkv, cos, sin, kv_heads)

    def rope_write_splits(self, qkv: Tensor, cos: Tensor, sin: Tensor, kv_heads: int):
        return self.step.rope_write_splits(self.i, qkv, cos, sin, kv_heads)


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
    """Dynamic cache: each layer's K/V grow by T along the sequence axis at every call.

    pad_lens (B,), the left-pad count of each row, is kept as first_valid: the position of
    each row's first real token (None: no pads). The position n lives on the host only."""

    def __init__(self, n_layers: int, pad_lens: Tensor | None = None):
        validate_int("n_layers", n_layers, hi=LIMITS.layers)
        if pad_lens is not None:
            validate_pad_lens(pad_lens)
        self.n_layers = n_layers
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.first_valid = pad_lens
        self.n = 0  # positions written so far
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        cos, sin = rope(T, self.n)
        if self.first_valid is None:
            self.attn_kwargs = causal_kwargs(self.n, T, cos.device)
        else:
            self.attn_kwargs = {"attn_mask": padded_causal_mask(self.n, T, self.first_valid)}
        return cos, sin

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def validate_batch(self, B: int) -> None:
        """The door for a call of B rows: the rows its pad_lens and its K/V hold already."""
        if self.first_valid is not None and len(self.first_valid) != B:
            raise ValueError(f"the cache's pad_lens hold {len(self.first_valid)} rows, the "
                             f"tokens {B}: one pad count a row")  # fmt: skip
        if self.k[0] is not None and self.k[0].shape[0] != B:
            raise ValueError(f"the cache holds {self.k[0].shape[0]} rows, the tokens {B}")

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k[i] = k if self.k[i] is None else torch.cat([self.k[i], k], dim=2)
        self.v[i] = v if self.v[i] is None else torch.cat([self.v[i], v], dim=2)
        return self.k[i], self.v[i]

    def end_step(self, T: int) -> None:
        self.n += T


# --- fixed shapes: the static, the slot and the paged cache ---------------------------------


class FixedCache:
    """What every fixed-shape cache shares (the static and the slot cache here, the paged one
    in paged.py): its sizes, K/V buffers made once (allocate(), which each kind shapes), its
    positions on the host and the device with snapshot() and restore(), and the transaction
    around a step."""

    def __init__(self, n_layers: int, max_len: int, device, limits: Limits):
        validate_limits(limits)
        validate_int("n_layers", n_layers, hi=limits.layers)
        validate_int("max_len", max_len, hi=limits.seq_len)
        self.device = validate_device(device)
        self.n_layers, self.max_len = n_layers, max_len
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.saved: dict | None = None  # the positions before the open transaction

    def buffers(self, i: int, k: Tensor) -> tuple[Tensor, Tensor]:
        """Layer i's K/V buffers, made at the first write if allocate() has not made them."""
        self.allocate(k.shape[1], k.shape[3], k.dtype)
        return self.k[i], self.v[i]

    def validate_snapshot(self, state) -> None:
        if not isinstance(state, dict) or state.keys() != self.snapshot().keys():
            raise ValueError(f"restore takes a snapshot() of this cache, got {state!r:.80}")

    @contextlib.contextmanager
    def transaction(self):
        """A step as one turn: if the block does not finish (an exception, Ctrl-C), the
        positions go back to what they were before it (restore(snapshot())). The block runs
        with Ctrl-C held off, so a second one cannot interrupt the putting back; one that
        arrives is raised when the block has finished or been undone. A transaction opened
        inside another one joins it: the outer one puts back."""
        if self.saved is not None:
            yield
            return
        with signals_held:
            self.sync()
            self.saved = self.snapshot()
            try:
                yield
            except BaseException:
                self.restore(self.saved)
                raise
            finally:
                self.saved = None

    def sync(self) -> None:
        """Bring the device into step with the host, if a restore() left it behind (the paged
        cache's rows); the other caches restore both at once."""

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


class WindowCache(FixedCache):
    """The static and the slot cache: rows of max_len positions, every layer's K/V in buffers
    (rows, kv_heads, max_len, head_dim), and the decode mask as a bias (rows, kv_heads,
    max_len). A decode step attends over a window of the first keys, a bucket wide: its
    graph is the window's (graph_key)."""

    def __init__(self, n_layers: int, rows: int, max_len: int, device, limits: Limits):
        super().__init__(n_layers, max_len, device, limits)
        self.bias: Tensor | None = None
        self.shape = (rows, max_len)  # rows × positions of every buffer

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        """Make every layer's K/V buffers (rows, kv_heads, max_len, head_dim) and the decode
        bias, which opens key 0 alone in every row until a prefill sets it. The decoders
        call it at construction, so that a graph can be captured before any prefill; else
        the first write makes them."""
        if self.k[0] is not None:
            return
        rows, max_len = self.shape
        shape = (rows, kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.k]
        self.v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.v]
        self.bias = torch.full(shape[:3], float("-inf"), dtype=dtype, device=self.device)
        self.bias[..., 0] = 0.0
        self.restore(self.snapshot())  # the bias of the positions held now

    def set_bias(self, rows, mask: Tensor) -> None:
        """Set the bias of some rows (an index or slice) from a boolean (rows, max_len) mask,
        the same for every K/V head."""
        if self.bias is not None:
            self.bias[rows] = additive(mask, self.bias.dtype)[..., None, :]

    def decode_bias(self, window: int) -> Tensor:
        """The bias as a decode step's attn_mask: (rows · kv_heads, 1, 1, window), a view,
        one batch row per K/V head as model.attend folds them."""
        R, H_kv, L = self.bias.shape
        return self.bias.view(R * H_kv, 1, 1, L)[..., :window]

    def validate_window(self, window) -> None:
        if not is_int(window) or not 1 <= window <= self.max_len:
            raise ValueError(f"window {window!r} outside [1, max_len {self.max_len}]")

    def graph_key(self, buckets: tuple[int, ...]) -> int:
        """The next decode step's window: the smallest bucket that holds its keys, picked on
        the host (no device read)."""
        n_keys = self.keys_needed()
        return next(b for b in buckets if b >= n_keys)

    def grow(self) -> None:
        """Before a decode step: nothing to hand out, every position has its place."""


class StaticKVCache(WindowCache):
    """Shared-position cache with fixed shapes: batch rows of max_len positions.

    reset(pad_lens) empties it for a new request; then prefilling() is the prompt's one model
    call and decoding(window) each decode step's (the two step classes below). pad_lens (B,),
    the left-pad count of each row, lives on the host as pad_lens and on the device as
    first_valid (the position of each row's first real token); n is the host copy of pos.
    """

    def __init__(self, n_layers: int, batch: int, max_len: int, device, limits=LIMITS):
        validate_int("batch", batch, hi=validate_limits(limits).rows)
        super().__init__(n_layers, batch, max_len, device, limits)
        self.batch = batch
        self.pos = torch.zeros(1, dtype=torch.long, device=self.device)
        self.first_valid = torch.zeros(batch, dtype=torch.long, device=self.device)
        self.pad_lens: list[int] | None = None  # None: no pads
        self.n = 0

    def reset(self, pad_lens: Tensor | None = None) -> None:
        """Empty the cache for a new request, left-padded by pad_lens (B,) if given."""
        if pad_lens is not None:
            validate_pad_lens(pad_lens, self.batch, self.max_len)
            pad_lens = pad_lens.tolist()
        self.restore({"n": 0, "pad_lens": pad_lens})

    def prefilling(self) -> "StaticPrefill":
        """The step of one prefill call, from position 0: reset() first."""
        if self.n != 0:
            raise ValueError(f"StaticKVCache prefills from position 0, it holds {self.n}: reset()")
        return StaticPrefill(self)

    def decoding(self, window: int) -> "StaticDecode":
        """The step of one decode call (one token per row) over `window` keys."""
        self.validate_window(window)
        return StaticDecode(self, window)

    def keys_needed(self) -> int:
        """Keys the next decode step attends over: every position so far, and its own."""
        return self.n + 1

    def advance_host(self) -> None:
        """After a decode step: move the host copy n as the step moved pos."""
        self.n += 1

    def snapshot(self) -> dict:
        return {"n": self.n, "pad_lens": self.pad_lens}

    def restore(self, state: dict) -> None:
        """Put back the positions of a snapshot(), on the host and on the device (pos, the
        pads, and the decode bias that follows from them), with Ctrl-C held off."""
        self.validate_snapshot(state)
        n, pad_lens = state["n"], state["pad_lens"]
        if not is_int(n) or not 0 <= n <= self.max_len:
            raise ValueError(f"snapshot position {n!r} outside [0, max_len {self.max_len}]")
        if pad_lens is not None and (
            len(pad_lens) != self.batch or any(not is_int(p) or p < 0 for p in pad_lens)
        ):
            raise ValueError(f"snapshot pad_lens {pad_lens!r}: {self.batch} ints >= 0 expected")
        with signals_held:
            self.n, self.pad_lens = n, pad_lens
            self.pos.fill_(n)
            self.first_valid.copy_(torch.tensor(pad_lens or [0] * self.batch))
            self.set_bias(slice(None), window_mask(n - 1, self.max_len, self.first_valid))


class StaticPrefill:
    """A StaticKVCache as one prefill call sees it: positions 0..T-1 of every row, causal,
    pads masked; at the end, pos = n = T and the decode bias opens the prompt's real keys."""

    def __init__(self, cache: StaticKVCache):
        self.cache = cache
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c = self.cache
        cos, sin = rope(T, 0)
        if c.pad_lens is None:
            self.attn_kwargs = causal_kwargs(0, T, cos.device)
        else:
            self.attn_kwargs = {"attn_mask": padded_causal_mask(0, T, c.first_valid)}
        return cos, sin

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        ck, cv = self.cache.buffers(i, k)
        T = k.shape[2]
        ck[:, :, :T] = k
        cv[:, :, :T] = v
        return ck[:, :, :T], cv[:, :, :T]

    def end_step(self, T: int) -> None:
        self.cache.restore({"n": T, "pad_lens": self.cache.pad_lens})


class StaticDecode:
    """A StaticKVCache as one decode step sees it: one token per row at the device position
    pos. K/V are written with index_copy_ at pos, the RoPE rows gathered with index_select
    at pos, key pos opened in the bias with index_fill_, and the first `window` keys
    returned, the ones past pos and the pads masked. Nothing here reads a host value of the
    position, so a CUDA graph can replay it."""

    def __init__(self, cache: StaticKVCache, window: int):
        self.cache, self.window, self.rows = cache, window, cache.batch
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c = self.cache
        c.bias.index_fill_(2, c.pos, 0.0)  # this step's own key joins the window
        self.attn_kwargs = {"attn_mask": c.decode_bias(self.window)}
        return rope.cos.index_select(0, c.pos), rope.sin.index_select(0, c.pos)

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c = self.cache
        ck, cv = c.buffers(i, k)
        ck.index_copy_(2, c.pos, k)
        cv.index_copy_(2, c.pos, v)
        return ck[:, :, : self.window], cv[:, :, : self.window]

    def end_step(self, T: int) -> None:
        self.cache.pos.add_(1)  # device work only: advance_host() moves n


class SlotKVCache(OnRows, WindowCache):
    """n_slots rows of max_len positions; each slot holds one request at its own length.

    prefilling(slot) is the step of one prompt's model call (1, T) into a free slot, which
    it takes when the call ends; decoding(window) is the step of all n_slots rows at once,
    each at its own length; release(slot) frees a slot. The slots' lengths and active flags
    are `rows` (rows.Rows, without blocks): lens_dev and active_dev on the device, lens and
    active their host twins. A decode step's end_step advances only lens_dev;
    advance_host() then advances lens.
    """

    def __init__(self, n_layers: int, n_slots: int, max_len: int, device, limits=LIMITS):
        validate_int("n_slots", n_slots, hi=validate_limits(limits).rows)
        super().__init__(n_layers, n_slots, max_len, device, limits)
        self.n_slots = n_slots
        self.rows = Rows(n_slots, max_len, self.device, block_size=None, limits=limits)

    def validate_slot(self, slot) -> None:
        if not is_int(slot) or not 0 <= slot < self.n_slots:
            raise ValueError(f"slot {slot!r} outside [0, {self.n_slots})")

    def prefilling(self, slot: int) -> "SlotPrefill":
        """The step of one prompt's model call into a free slot (no pads)."""
        self.validate_slot(slot)
        if self.active[slot]:
            raise ValueError(f"slot {slot} is in use: release it first")
        return SlotPrefill(self, slot)

    def decoding(self, window: int) -> "SlotDecode":
        """The step of one decode call, one token per slot, over `window` keys."""
        self.validate_window(window)
        return SlotDecode(self, window)

    def admit(self, slot: int, length: int) -> None:
        """Slot `slot` holds a request of `length` positions, on the host and on the device,
        and its decode bias opens keys 0..length-1 (slot_mask at its last key)."""
        self.rows.admit([slot], [length])
        self.set_bias(slot, slot_mask(torch.tensor([length - 1], device=self.device),
                                      self.max_len)[0])  # fmt: skip

    def release(self, slot: int) -> None:
        self.validate_slot(slot)
        self.rows.release([slot])
        self.rows.flush()
        self.set_bias(slot, slot_mask(torch.zeros(1, dtype=torch.long, device=self.device),
                                      self.max_len)[0])  # fmt: skip

    def keys_needed(self) -> int:
        """Keys the next decode step attends over: the longest slot's, and its own."""
        return int(self.rows.lens.max()) + 1

    def advance_host(self) -> None:
        """After a decode step: advance the host lengths of active slots, as end_step did
        on the device."""
        self.rows.advance_host()

    def snapshot(self):
        return self.rows.snapshot()

    def validate_snapshot(self, state) -> None:
        self.rows.validate_snapshot(state)

    def restore(self, state) -> None:
        """Put back the positions of a snapshot(): on the host at once (an assignment), then
        on the device (lengths, active flags, and the decode bias that follows from them).
        If the device write fails, the next transaction writes it first (sync)."""
        self.validate_snapshot(state)
        self.rows.restore(state)
        with contextlib.suppress(Exception):
            self.sync()

    def sync(self) -> None:
        """The device from the host, after a restore(): every slot's bias, then the rows."""
        if self.rows.in_step():
            return
        if self.bias is not None:
            last = torch.as_tensor(np.maximum(self.rows.lens - 1, 0), device=self.device)
            self.set_bias(slice(None), slot_mask(last, self.max_len))
        self.rows.flush()


class SlotPrefill:
    """A SlotKVCache as one prompt's prefill call sees it: the prompt (1, T) written at
    positions 0..T-1 of its slot, causal; at the end the slot holds it, at length T."""

    def __init__(self, cache: SlotKVCache, slot: int):
        self.cache, self.slot = cache, slot
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        cos, sin = rope(T, 0)
        self.attn_kwargs = causal_kwargs(0, T, cos.device)
        return cos, sin

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        s, T = self.slot, k.shape[2]
        ck, cv = self.cache.buffers(i, k)
        ck[s, :, :T] = k[0]
        cv[s, :, :T] = v[0]
        return ck[s : s + 1, :, :T], cv[s : s + 1, :, :T]

    def end_step(self, T: int) -> None:
        self.cache.admit(self.slot, T)


class SlotDecode:
    """A SlotKVCache as one decode step sees it: all n_slots rows at once. Row b writes its
    new K/V at position lens_dev[b], opens that key in its bias, and attends to keys
    0..lens_dev[b] of the first `window`; free rows compute too (they attend to key 0 alone)
    but do not advance."""

    def __init__(self, cache: SlotKVCache, window: int):
        self.cache, self.window, self.rows = cache, window, cache.n_slots
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c = self.cache
        R, H_kv, _ = c.bias.shape  # each row opens its own new key, at lens_dev[b]
        c.bias.scatter_(2, c.lens_dev.view(R, 1, 1).expand(R, H_kv, 1), 0.0)
        self.attn_kwargs = {"attn_mask": c.decode_bias(self.window)}
        # each slot at its own position: per-row cos/sin, shape (n_slots, 1, D/2)
        return rope.cos[c.lens_dev][:, None], rope.sin[c.lens_dev][:, None]

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c = self.cache
        ck, cv = c.buffers(i, k)
        H, D = k.shape[1], k.shape[3]
        where = c.lens_dev.view(-1, 1, 1, 1).expand(-1, H, 1, D)  # row b writes at lens_dev[b]
        ck.scatter_(2, where, k)
        cv.scatter_(2, where, v)
        return ck[:, :, : self.window], cv[:, :, : self.window]

    def end_step(self, T: int) -> None:
        self.cache.lens_dev.add_(self.cache.active_dev)  # device only: advance_host() moves lens
