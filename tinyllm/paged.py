"""The paged KV cache: what every serving engine decodes from (notebook 08).

Keys and values live in a pool of blocks, each `block_size` positions of every K/V head, per
layer: (n_blocks, kv_heads, block_size, head_dim). A row (a request) owns a list of blocks,
its block table; its position p is at offset p % block_size of its block p // block_size.
The block table (n_rows, max_len / block_size) and the lengths (n_rows,) live on the device,
int32, with host twins, in fixed buffers updated in place: the decode step's shapes depend
only on how many rows it runs, never on a length. So one CUDA graph per number of rows (a
*capture size*), captured once at any length, replays at every length: no window, no bucket,
no mask (kernels.paged_decode_attention reads each row's length and blocks on the device).

Blocks are handed out on the host, between steps, from a free list: a row's prompt blocks
when it is prefilled, and one more when its next position crosses into a new block
(grow()). release(row) returns them. Block 0 is the scratch block: a row that holds no
request has length 0 and a table of zeros, so a step that computes it too (a padded row of
a capture size) writes its key there and attends to that one key, finite and ignored.
A row is an index into the block table: move(src, dst) moves a request's table row and
length, never its K/V.

    cache = PagedKVCache(n_layers, n_rows, max_len, device)
    model(idx, cache=cache.prefilling(rows))     # the prompts of those rows, one length
    model(idx, cache=cache.prefilling_chunk(rows, start, counts))   # or chunks of several
    cache.grow(); model(tok, cache=cache.decoding(n)); cache.advance_host()   # rows 0..n-1
"""

import torch
from torch import Tensor

from tinyllm.kernels import paged_decode_attention
from tinyllm.kv_cache import FixedCache, LayerKV, causal_kwargs
from tinyllm.validate import LIMITS, interrupts_held, is_int, validate_int, validate_limits

SCRATCH = 0  # the block a row without a request points at


def to_device(values, device, dtype=torch.long) -> Tensor:
    """Host values as a tensor on `device`, without waiting for the GPU. A plain copy from
    host memory to CUDA waits for every kernel queued before it (PyTorch's copy_kernel_cuda:
    cudaMemcpyAsync, then cudaStreamSynchronize), which would end the host's overlap with a
    step in flight; from pinned memory the copy is queued like a kernel."""
    t = torch.tensor(values, dtype=dtype)
    if torch.device(device).type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def copy_from_host(dst: Tensor, values) -> None:
    """dst[: len(values)] = values, without waiting for the GPU (to_device's rule)."""
    t = torch.tensor(values, dtype=dst.dtype)
    if dst.is_cuda:
        t = t.pin_memory()
    dst[: len(values)].copy_(t, non_blocking=True)


class PagedKVCache(FixedCache):
    """n_rows rows of up to max_len positions, in a pool of n_blocks blocks of block_size
    positions (default: enough for every row at max_len, and the scratch block).

    Host twins: lens (each row's length), active (whether it holds a request), tables (each
    row's blocks) and free (the blocks no row holds); device: lens_dev, active_dev and
    block_table. A decode step's end_step advances only lens_dev; advance_host() then lens.
    """

    def __init__(self, n_layers: int, n_rows: int, max_len: int, device, block_size: int = 16,
                 n_blocks: int | None = None, limits=LIMITS):  # fmt: skip
        validate_int("n_rows", n_rows, hi=validate_limits(limits).rows)
        validate_int("block_size", block_size, hi=1024)
        super().__init__(n_layers, max_len, device, limits)
        self.n_rows, self.block_size = n_rows, block_size
        self.shape = (n_rows, max_len)  # rows × positions, as the other fixed caches
        self.max_blocks = -(-max_len // block_size)  # blocks of a row at max_len
        n_blocks = n_rows * self.max_blocks + 1 if n_blocks is None else n_blocks
        validate_int("n_blocks", n_blocks, lo=2, hi=n_rows * self.max_blocks + 1)
        self.n_blocks = n_blocks
        self.lens, self.active = [0] * n_rows, [False] * n_rows
        self.tables: list[list[int]] = [[] for _ in range(n_rows)]
        self.free = list(range(1, n_blocks))
        self.lens_dev = torch.zeros(n_rows, dtype=torch.int32, device=self.device)
        self.active_dev = torch.zeros(n_rows, dtype=torch.int32, device=self.device)
        self.block_table = torch.zeros(n_rows, self.max_blocks, dtype=torch.int32,
                                       device=self.device)  # fmt: skip

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        """Make every layer's pools (n_blocks, kv_heads, block_size, head_dim)."""
        if self.k[0] is not None:
            return
        shape = (self.n_blocks, kv_heads, self.block_size, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.k]
        self.v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.v]

    # --- the host's moves, between steps ------------------------------------------------

    def validate_row(self, row) -> None:
        if not is_int(row) or not 0 <= row < self.n_rows:
            raise ValueError(f"row {row!r} outside [0, {self.n_rows})")

    def blocks_for(self, n_positions: int) -> int:
        return -(-n_positions // self.block_size)

    def prefilling(self, rows) -> "PagedPrefill":
        """The step of one prefill call whose idx holds the prompts of `rows` (free rows, in
        that order), all of one length; each row takes its blocks when the call ends."""
        if isinstance(rows, int) or not hasattr(rows, "__iter__"):
            raise ValueError(f"rows must be a list of rows, got {rows!r}")
        rows = list(rows)
        for row in rows:
            self.validate_row(row)
            if self.active[row]:
                raise ValueError(f"row {row} is in use: release it first")
        if not rows or len(set(rows)) != len(rows):
            raise ValueError(f"rows must be distinct, and at least one, got {rows}")
        return PagedPrefill(self, rows)

    def prefilling_chunk(self, rows, start: int, counts) -> "PagedChunk":
        """The step of one chunk of a batched prefill (the engine's): idx (len(rows), T),
        row rows[b]'s prompt positions start..start + counts[b] - 1, right-padded to T =
        max(counts). At start 0 the rows must be free; later, each holds start positions."""
        if isinstance(rows, int) or not hasattr(rows, "__iter__"):
            raise ValueError(f"rows must be a list of rows, got {rows!r}")
        rows, counts = list(rows), list(counts)
        validate_int("start", start, lo=0, hi=self.max_len - 1)
        if not rows or len(set(rows)) != len(rows) or len(counts) != len(rows):
            raise ValueError(f"rows must be distinct, at least one, with one count each, got "
                             f"rows {rows} and counts {counts}")  # fmt: skip
        for row, n in zip(rows, counts):
            self.validate_row(row)
            validate_int("count", n, hi=self.max_len - start)
            if self.active[row] != (start > 0) or self.active[row] and self.lens[row] != start:
                raise ValueError(f"row {row} holds {self.lens[row]} positions, a chunk at "
                                 f"{start} needs {start} (0: a free row)")  # fmt: skip
        return PagedChunk(self, rows, start, counts)

    def filling(self, table: Tensor, count: Tensor) -> "PagedFill":
        """The step of a prefill graph (graphs.PrefillGraphs): prompts padded to one length,
        each written into the blocks of its row of `table`, its first count[b] positions;
        everything a device tensor, so one graph serves any prompts that fit."""
        return PagedFill(self, table, count)

    def filled(self, rows, counts) -> None:
        """After a prefill graph set the rows on the device: the host lengths and flags follow."""
        for row, n in zip(rows, counts):
            self.lens[row], self.active[row] = n, True

    def decoding(self, n: int) -> "PagedDecode":
        """The step of one decode call over rows 0..n-1, one token each."""
        validate_int("rows", n, hi=self.n_rows)
        return PagedDecode(self, n)

    def take(self, row: int, n_positions: int) -> None:
        """Hand row `row` the blocks it lacks for n_positions positions, from the free list."""
        first = len(self.tables[row])
        for k, block in enumerate(self.reserve(row, n_positions), start=first):
            self.block_table[row, k : k + 1] = block  # a slice: [row, k] = would sync (below)

    def reserve(self, row: int, n_positions: int) -> list[int]:
        """take() on the host alone: the blocks row `row` lacks for n_positions positions go
        into its host table; returns them (the caller writes the device table)."""
        need = self.blocks_for(n_positions) - len(self.tables[row])
        if need > len(self.free):
            raise ValueError(
                f"row {row} needs {need} more blocks, {len(self.free)} are free: release a row"
            )
        blocks = [self.free.pop() for _ in range(need)]
        self.tables[row] += blocks
        return blocks

    def grow(self) -> None:
        """Before a decode step: every active row whose next position crosses into a new
        block takes it."""
        for row in range(self.n_rows):
            if self.active[row]:
                self.take(row, self.lens[row] + 1)

    def release(self, row: int) -> None:
        """Free a row: its blocks go back to the free list, its table to the scratch block."""
        self.validate_row(row)
        self.free += reversed(self.tables[row])
        self.tables[row] = []
        self.set_row(row, 0, False, [])

    def move(self, src: int, dst: int) -> None:
        """Move the request of row src to the free row dst: its table row and its length."""
        self.validate_row(src)
        self.validate_row(dst)
        if self.active[dst] or not self.active[src]:
            raise ValueError(f"move needs a request in row {src} and row {dst} free")
        self.set_row(dst, self.lens[src], True, self.tables[src])
        self.tables[src] = []
        self.set_row(src, 0, False, [])

    def set_row(self, row: int, length: int, active: bool, blocks: list[int]) -> None:
        """One row's length, active flag and blocks, on the host and on the device. Written
        through slices: setting one element of a CUDA tensor from a Python number copies it
        from pageable host memory and waits for the GPU (pytorch/pytorch#186482), a slice is
        a fill kernel."""
        self.lens[row], self.active[row], self.tables[row] = length, active, list(blocks)
        self.lens_dev[row : row + 1] = length
        self.active_dev[row : row + 1] = int(active)
        self.block_table[row : row + 1] = SCRATCH
        if blocks:
            self.block_table[row, : len(blocks)] = to_device(blocks, self.device, torch.int32)

    def free_slots(self) -> list[int]:
        """The rows that hold no request (the engine's slots)."""
        return [r for r in range(self.n_rows) if not self.active[r]]

    def rows_in_use(self) -> int:
        """One more than the last row that holds a request (rows are kept compact)."""
        return max((r + 1 for r in range(self.n_rows) if self.active[r]), default=0)

    def keys_needed(self) -> int:
        """Keys the next decode step attends over, in its longest row."""
        return max(self.lens) + 1

    def graph_key(self, capture_sizes: tuple[int, ...]) -> int:
        """The next decode step's capture size: the smallest that holds the rows in use."""
        n = max(self.rows_in_use(), 1)
        return next(c for c in capture_sizes if c >= n)

    def advance_host(self) -> None:
        """After a decode step: advance the host lengths of active rows, as end_step did on
        the device."""
        self.lens = [n + a for n, a in zip(self.lens, self.active)]

    def snapshot(self) -> dict:
        return {"lens": list(self.lens), "active": list(self.active),
                "tables": [list(t) for t in self.tables], "free": list(self.free)}  # fmt: skip

    def restore(self, state: dict) -> None:
        """Put back the positions and blocks of a snapshot(), on the host and the device."""
        self.validate_snapshot(state)
        lens, active, tables = list(state["lens"]), list(state["active"]), state["tables"]
        held = sorted(b for t in tables for b in t)
        if (
            len(lens) != self.n_rows
            or len(tables) != self.n_rows
            or any(not is_int(n) or not 0 <= n <= self.max_len for n in lens)
            or sorted(held + list(state["free"])) != list(range(1, self.n_blocks))
        ):
            raise ValueError("restore takes a snapshot() of this cache: rows, lengths or "
                             "blocks do not add up")  # fmt: skip
        with interrupts_held():
            self.free = list(state["free"])
            for row in range(self.n_rows):
                self.set_row(row, lens[row], bool(active[row]), tables[row])


class PagedFill:
    """A PagedKVCache as a prefill graph sees it: prompts (R, T) right-padded, row b's first
    count[b] positions written at positions 0.. of the blocks in table[b] (R, max_blocks),
    the rest (pads, and whole pad rows of count 0) to the scratch block; causal, each prompt
    attending to its own keys. Nothing here reads a host value. The rows' lengths, flags and
    tables are the caller's to set, on the device inside the same graph."""

    def __init__(self, cache: PagedKVCache, table: Tensor, count: Tensor):
        self.cache, self.table, self.count = cache, table, count
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c = self.cache
        pos = torch.arange(T, device=c.device)
        real = pos[None] < self.count[:, None]  # (R, T)
        blocks = torch.where(real, self.table[:, pos // c.block_size], SCRATCH)
        self.where = blocks, pos % c.block_size
        cos, sin = rope(T, 0)
        self.attn_kwargs = causal_kwargs(0, T, cos.device)
        return cos, sin

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        kc, vc = self.cache.buffers(i, k)
        blocks, offsets = self.where
        kc[blocks, :, offsets] = k.transpose(1, 2)  # (R, T, kv_heads, D) into the pool
        vc[blocks, :, offsets] = v.transpose(1, 2)
        return k, v

    def end_step(self, T: int) -> None:
        pass  # the prefill graph sets lengths, flags and tables after the forward


class PagedPrefill(PagedFill):
    """A PagedKVCache as one prefill call sees it: the prompts (len(rows), T) written at
    positions 0..T-1 of their rows' blocks, causal; at the end each row holds its request,
    at length T. PagedFill, with the rows' blocks handed out and their lengths set here, on
    the host."""

    def __init__(self, cache: PagedKVCache, rows: list[int]):
        super().__init__(cache, table=None, count=None)
        self.rows = rows

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c = self.cache
        for row in self.rows:  # the prompt's blocks, handed out before any is written
            c.take(row, T)
        self.table = to_device([c.tables[r] for r in self.rows], c.device)
        self.count = torch.full((len(self.rows),), T, device=c.device)
        return super().begin_step(T, rope)

    def end_step(self, T: int) -> None:
        c = self.cache
        for row in self.rows:
            c.set_row(row, T, True, c.tables[row])


class PagedChunk(PagedFill):
    """A PagedKVCache as one chunk of a batched prefill sees it: the prompts of several rows,
    each at positions start..start + counts[b] - 1, right-padded to T = max(counts). Each row
    writes its positions into its own blocks (a pad position writes to the scratch block) and
    attends, causally, to its earlier chunks and this one, gathered from its blocks; pad keys
    are masked, and a pad query attends to its row's keys, finite and ignored."""

    def __init__(self, cache: PagedKVCache, rows: list[int], start: int, counts: list[int]):
        super().__init__(cache, table=None, count=None)  # its writes are a PagedFill's
        self.rows, self.start, self.counts = rows, start, counts

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c, start = self.cache, self.start
        for row, n in zip(self.rows, self.counts):  # this chunk's blocks, before any write
            c.take(row, start + n)
        S = start + T  # the keys of the chunk's longest row
        width = c.blocks_for(S)
        tables = [c.tables[r] + [SCRATCH] * (width - len(c.tables[r])) for r in self.rows]
        table = to_device(tables, c.device)
        pos = torch.arange(S, device=c.device)
        ends = start + to_device(self.counts, c.device)
        real = pos[None] < ends[:, None]  # (rows, S): the prompt's positions, not pads
        blocks = torch.where(real, table[:, pos // c.block_size], SCRATCH)
        self.keys = blocks, pos % c.block_size  # (rows, S) each: where every key lies
        self.where = blocks[:, start:], pos[start:] % c.block_size  # this chunk's writes
        causal = pos[None, :] <= pos[start:, None]  # (T, S)
        self.attn_kwargs = {"attn_mask": (causal[None] & real[:, None])[:, None]}
        return rope(T, start)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        super().update(i, k, v)  # this chunk's K/V into the pool, as a prefill writes them
        kc, vc = self.cache.buffers(i, k)
        blocks, offsets = self.keys  # then every key of the rows, earlier chunks included
        return kc[blocks, :, offsets].transpose(1, 2), vc[blocks, :, offsets].transpose(1, 2)

    def end_step(self, T: int) -> None:
        c = self.cache
        for row, n in zip(self.rows, self.counts):
            c.set_row(row, self.start + n, True, c.tables[row])


class PagedDecode:
    """A PagedKVCache as one decode step sees it: rows 0..n-1, one token each. Row b writes
    its new K/V at position lens_dev[b] (block block_table[b, lens_dev[b] // block_size],
    offset lens_dev[b] % block_size) and attends to its first lens_dev[b] + 1 keys through
    kernels.paged_decode_attention; rows that hold no request compute too, on the scratch
    block, and do not advance. Nothing here reads a host value: a CUDA graph replays it at
    every length."""

    def __init__(self, cache: PagedKVCache, n: int):
        self.cache, self.rows = cache, n
        self.attn_kwargs: dict = {}

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        c, n = self.cache, self.rows
        pos = c.lens_dev[:n].long()
        table = c.block_table[:n]
        self.where = table.gather(1, (pos // c.block_size)[:, None])[:, 0], pos % c.block_size
        self.attn_kwargs = {"block_table": table, "lens": c.lens_dev[:n] + 1}
        return rope.cos[pos][:, None], rope.sin[pos][:, None]  # each row at its own position

    def layer(self, i: int) -> LayerKV:
        return LayerKV(self, i)

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        kc, vc = self.cache.buffers(i, k)
        blocks, offsets = self.where
        kc[blocks, :, offsets] = k[:, :, 0]  # (n, kv_heads, D) at each row's block and offset
        vc[blocks, :, offsets] = v[:, :, 0]
        return kc, vc  # the pools: attend() reads them through the block table

    def end_step(self, T: int) -> None:
        n = self.rows
        self.cache.lens_dev[:n].add_(self.cache.active_dev[:n])  # advance_host() moves lens


__all__ = ["PagedKVCache", "copy_from_host", "paged_decode_attention", "to_device"]
