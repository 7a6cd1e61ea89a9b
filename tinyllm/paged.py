"""The paged KV cache: what every serving engine decodes from (notebook 08).

Keys and values live in a pool of blocks, each `block_size` positions of every K/V head, per
layer: (n_blocks, kv_heads, block_size, head_dim). A row (a request) owns a list of blocks,
its block table; its position p is at offset p % block_size of its block p // block_size.
The block table (n_rows, max_len / block_size) and the lengths (n_rows,) live on the device,
in one fixed int64 buffer updated in place (rows.Rows.state): the decode step's shapes
depend only on how many rows it runs, never on a length. So one CUDA graph per number of
rows (a *capture size*), captured once at any length, replays at every length: no window,
no bucket, no mask (kernels.rope_write_attend reads each row's length and blocks on the
device).

The cache holds the pools; `cache.rows` (rows.Rows) holds everything a step reads for each
row, on the device and as host twins, and the free list of blocks. Blocks are handed out on
the host, between steps: a prompt's blocks before its prefill (rows.take), and one more when
a row's next position crosses into a new block (rows.grow). rows.release gives them back.
Block 0 is the scratch block: a row that holds no request has length 0 and a table of
zeros, so a step that computes it too (a padded row of a capture size) writes its key there
and attends to that one key, finite and ignored. A row is an index into the block table:
rows.move moves a request's table row and length, never its K/V.

    cache = PagedKVCache(n_layers, n_rows, max_len, device)
    cache.rows.take(rows, lens)                                 # the prompts' blocks, on the host
    model(idx, cache=cache.fill(rows, lens))                    # the prompts' K/V into them
    cache.rows.admit(rows, lens)                                # the rows hold them now
    cache.grow(); model(tok, cache=cache.decoding(n)); cache.advance_host()   # rows 0..n-1
"""

import contextlib

import torch
from torch import Tensor

from tinyllm.kernels import paged_decode_attention, rope_write_attend, rope_write_splits
from tinyllm.kv_cache import FixedCache, LayerKV, causal_kwargs
from tinyllm.rows import ACTIVE, LEN, SCRATCH, TABLE, OnRows, Rows, to_device
from tinyllm.validate import LIMITS, validate_block_size, validate_int, validate_limits


class PagedKVCache(OnRows, FixedCache):
    """n_rows rows of up to max_len positions, in a pool of n_blocks blocks of block_size
    positions (default: enough for every row at max_len, and the scratch block). block_size
    is a power of two: the decode kernel's tl.arange over a block needs one.

    The rows' state (lengths, active flags, block tables, next ids, sampling arguments, the
    free list) is `rows`, with its host twins; lens and active here are the host twins, to
    read. A decode step's end_step advances only lens_dev; advance_host() then lens."""

    def __init__(self, n_layers: int, n_rows: int, max_len: int, device, block_size: int = 16,
                 n_blocks: int | None = None, limits=LIMITS):  # fmt: skip
        validate_int("n_rows", n_rows, hi=validate_limits(limits).rows)
        validate_block_size(block_size)
        super().__init__(n_layers, max_len, device, limits)
        self.n_rows, self.block_size = n_rows, block_size
        self.shape = (n_rows, max_len)  # rows × positions, as the other fixed caches
        self.max_blocks = -(-max_len // block_size)  # blocks of a row at max_len
        n_blocks = n_rows * self.max_blocks + 1 if n_blocks is None else n_blocks
        validate_int("n_blocks", n_blocks, lo=2, hi=n_rows * self.max_blocks + 1)
        self.n_blocks = n_blocks
        self.rows = Rows(n_rows, max_len, self.device, block_size, n_blocks, limits)

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        """Make every layer's pools (n_blocks, kv_heads, block_size, head_dim)."""
        if self.k[0] is not None:
            return
        shape = (self.n_blocks, kv_heads, self.block_size, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.k]
        self.v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.v]

    # --- the host twins, to read; the rows' moves are cache.rows' -------------------------

    @property
    def tables(self) -> list[list[int]]:
        return self.rows.tables()

    @property
    def free(self) -> list[int]:
        return self.rows.free

    # the device table, the rows' own buffer (read it; a new tensor is refused)
    block_table = property(lambda self: self.rows.block_table, lambda self, t: self.rows.keep(t))

    def blocks_for(self, n_positions: int) -> int:
        return -(-n_positions // self.block_size)

    def keys_needed(self) -> int:
        """Keys the next decode step attends over, in its longest row."""
        return int(self.rows.lens.max()) + 1

    def graph_key(self, capture_sizes: tuple[int, ...]) -> int:
        """The next decode step's capture size: the smallest that holds the rows in use."""
        n = max(self.rows.in_use(), 1)
        return next(c for c in capture_sizes if c >= n)

    def advance_host(self) -> None:
        self.rows.advance_host()

    def snapshot(self):
        return self.rows.snapshot()

    def restore(self, state) -> None:
        """Put back a snapshot() of the rows: on the host at once (an assignment), then on
        the device. If the device write fails, the rows stay marked out of step, and the
        next transaction writes them first (sync)."""
        self.rows.validate_snapshot(state)
        self.rows.restore(state)
        with contextlib.suppress(Exception):
            self.rows.flush()

    def sync(self) -> None:
        self.rows.flush()

    def grow(self) -> None:
        self.rows.grow()
        self.rows.flush()

    # --- the steps a model call sees ----------------------------------------------------

    def fill(self, rows, counts, start: int = 0) -> "PagedFill":
        """The step of a prefill call (or one chunk of it): idx (len(rows), T) holds row
        rows[b]'s positions start..start + counts[b] - 1, right-padded to T; their blocks
        taken already (rows.take). The rows' tables go to the device in one upload."""
        r = self.rows.validate_rows(rows)
        n = self.rows.validate_lens(r, counts)
        validate_int("start", start, lo=0, hi=self.max_len - 1)
        width = self.blocks_for(start + int(n.max()))
        held = self.rows.host.held[r]
        if (held < self.rows.blocks_for(start + n)).any():
            raise ValueError("fill needs the rows' blocks first: cache.rows.take(rows, lens)")
        table = to_device(self.rows.tables_host[r, :width], self.device)
        fits = (int(n.max()), width * self.block_size - start)  # the widths idx may have
        return PagedFill(self, table, to_device(n, self.device), start, fits)

    def filling(self, table: Tensor, count: Tensor) -> "PagedFill":
        """The step of a prefill graph: tables and counts already device tensors, in fixed
        buffers, so one graph serves any prompts that fit."""
        return PagedFill(self, table, count)

    def decoding(self, n: int) -> "PagedDecode":
        """The step of one decode call over rows 0..n-1, one token each."""
        validate_int("rows", n, hi=self.n_rows)
        return PagedDecode(self, n)


class PagedFill:
    """A PagedKVCache as a prefill sees it: idx (R, T) right-padded, row b's positions
    start..start + count[b] - 1 written at their blocks of table[b] (R, blocks); pads, and
    whole pad rows of count 0, write to the scratch block. At start 0 each prompt attends,
    causally, to its own keys; a later chunk (start > 0) attends to its row's earlier
    positions too, read back from its blocks (pad keys masked; a pad query attends to its
    row's keys, finite and ignored). Nothing here reads a host value but start. The rows'
    lengths, flags and tables are the caller's to set (rows.admit, or inside a prefill
    graph)."""

    def __init__(self, cache: PagedKVCache, table: Tensor, count: Tensor, start: int = 0,
                 fits: tuple[int, int] | None = None):  # fmt: skip
        self.cache, self.table, self.count, self.start = cache, table, count, start
        self.fits = fits  # fill()'s: the least and the most positions idx may hold a row
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c, start = self.cache, self.start
        if self.fits is not None and not self.fits[0] <= T <= self.fits[1]:
            raise ValueError(f"idx holds {T} positions a row; the counts given to fill ask for "
                             f"{self.fits[0]}, and the rows' blocks hold {self.fits[1]}: give "
                             f"fill and take each prompt's length")  # fmt: skip
        pos = torch.arange(start + T, device=c.device)  # every key of the rows, 0..start+T-1
        real = pos[None] < (start + self.count)[:, None]  # (R, start + T): not a pad
        blocks = torch.where(real, self.table[:, pos // c.block_size], SCRATCH)
        self.keys = blocks, pos % c.block_size
        self.where = blocks[:, start:], pos[start:] % c.block_size  # this call's writes
        if start == 0:
            self.attn_kwargs = causal_kwargs(0, T, c.device)
        else:
            causal = pos[None, :] <= pos[start:, None]  # (T, start + T)
            self.attn_kwargs = {"attn_mask": (causal[None] & real[:, None])[:, None]}
        return rope(T, start)

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        kc, vc = self.cache.buffers(i, k)
        blocks, offsets = self.where
        kc[blocks, :, offsets] = k.transpose(1, 2)  # (R, T, kv_heads, D) into the pool
        vc[blocks, :, offsets] = v.transpose(1, 2)
        if self.start == 0:
            return k, v
        blocks, offsets = self.keys  # every key of the rows, earlier chunks included
        return kc[blocks, :, offsets].transpose(1, 2), vc[blocks, :, offsets].transpose(1, 2)

    def end_step(self, T: int) -> None:
        pass  # the caller admits the rows (rows.admit), or the prefill graph sets them


class PagedDecode:
    """A PagedKVCache as one decode step sees it: rows 0..n-1, one token each. Each layer's
    RoPE, K/V write and attention are one op, kernels.rope_write_attend: row b rotates its
    query and new key at position lens_dev[b], writes the new K/V at block
    block_table[b, lens_dev[b] // block_size], offset lens_dev[b] % block_size, and attends
    to its first lens_dev[b] + 1 keys. One kernel a layer on CUDA (two when a row's keys are
    split). Or rope_write_splits: the same kernel, its splits left for the model's output
    projection to combine (Block.decode, at a few rows). Rows that hold no request compute
    too, on the scratch block, and do not advance. Nothing here reads a host value: a CUDA
    graph replays it at every length."""

    def __init__(self, cache: PagedKVCache, n: int):
        self.cache, self.rows = cache, n

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        # every view taken here, from the rows' one state tensor: a compiled step then sees
        # one input, not several views of it (AOTAutograd cannot rebuild the table's view
        # from the state once end_step writes the lengths)
        state = self.cache.rows.state[: self.rows]
        self.lens, self.table = state[:, LEN], state[:, TABLE:]
        return rope.cos, rope.sin  # the whole tables: the kernel reads each row's position

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def rope_write_attend(self, i: int, qkv: Tensor, cos: Tensor, sin: Tensor, kv_heads: int):
        """Layer i's step from its projections qkv (n, H + 2·kv_heads, D) before RoPE and
        RoPE's tables cos, sin (positions, D / 2): the attention's output (n, H, D)."""
        self.cache.allocate(kv_heads, qkv.shape[-1], qkv.dtype)
        kc, vc = self.cache.k[i], self.cache.v[i]
        return rope_write_attend(qkv, cos, sin, kc, vc, self.table, self.lens)

    def rope_write_splits(self, i: int, qkv: Tensor, cos: Tensor, sin: Tensor, kv_heads: int):
        """The same, stopped before the combine: the splits (part, max, sum) that
        projections.combine_project_add combines in the output projection."""
        self.cache.allocate(kv_heads, qkv.shape[-1], qkv.dtype)
        kc, vc = self.cache.k[i], self.cache.v[i]
        return rope_write_splits(qkv, cos, sin, kc, vc, self.table, self.lens)

    def end_step(self, T: int) -> None:
        state = self.cache.rows.state[: self.rows]
        state[:, LEN] += state[:, ACTIVE]  # advance_host() moves lens


__all__ = ["PagedKVCache", "paged_decode_attention", "to_device"]
