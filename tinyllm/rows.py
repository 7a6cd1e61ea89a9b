"""Rows: what a decode step reads for each row of its batch, with one owner (notebooks 08-09).

A step of the paged engine reads, for each row: the id it decodes (`tok`), its length, whether
it holds a request, its block table and its sampling arguments (temperature, top-k, seed).
Rows keeps all of them. Each lives on the device in a fixed buffer, which the graphs capture,
and the host keeps a twin of each beside it, in numpy arrays, where the host needs one:

    host (numpy)       device (torch)      what
    lens               lens_dev            each row's length: the position its next key takes
    active             active_dev          whether it holds a request
    tables_host, held  block_table         its blocks (SCRATCH past the ones it holds)
    host.state         temperature, ...    its sampling arguments (top_k, seed too)
    rid                                    the request it holds (-1: none), for the host
    left, n_out                            the ids its request may still take, and has taken
    free                                   the blocks no row holds, a stack
                       tok                 the id it decodes next (sampled on the device)

Every device buffer but tok is a column of one int64 tensor, `state`, and every host twin but
rid, held, left, n_out and free a column of its numpy twin, `host.state`: a row's whole state
is one row.

A *change* of the rows: admit (rows take requests), grow (rows about to cross into a new block
take one), release (rows give their blocks back), move (requests go to other rows),
advance_host (the host lengths follow a step). Each is vectorised numpy on the host, and marks
the rows it changed. flush() then brings the device into step: one upload, through pinned memory,
of rows 0 to the last row changed since the last flush, however many changed, together with
the moves since then (their ids follow them on the device). A step flushes once, before its
replay. So the host's work per step, and the torch ops it issues outside its
replay, do not grow with the rows. vLLM V1's persistent batch (InputBatch) is the same idea:
the batch's inputs live in fixed arrays, updated in place as requests come, go and move,
never rebuilt.

The host is the truth between turns. snapshot() copies it (and `tok`, the one input only the
device holds); restore() puts a copy back with one assignment, which cannot fail, and marks
the whole device out of step; the next flush() rewrites it. So a turn that does not finish is
undone by one assignment, and nothing that goes wrong while undoing it (an exception, Ctrl-C,
a timer) leaves host and device apart.
"""

from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

from tinyllm.validate import (
    LIMITS,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    SEED_LIMIT,
    is_int,
    validate_block_size,
    validate_device,
    validate_int,
    validate_limits,
)

SCRATCH = 0  # the block a row without a request points at: no request ever holds it


def to_device(values, device, dtype=torch.long) -> Tensor:
    """Host values as a tensor on `device`, without waiting for the GPU. A plain copy from
    host memory to CUDA waits for every kernel queued before it (PyTorch's copy_kernel_cuda:
    cudaMemcpyAsync, then cudaStreamSynchronize), which would end the host's overlap with a
    step in flight; from pinned memory the copy is queued like a kernel."""
    t = torch.as_tensor(np.asarray(values), dtype=dtype)
    if torch.device(device).type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


class Upload:
    """upload(values) sets dst[: values.size] = values (flat), without waiting for the GPU
    (to_device's rule): straight into dst, with no device allocation and no indexed write.
    On CUDA the values go through pinned buffers of its own, allocated once and used in turn.
    A buffer is written again only after the copy from it has run (its event), so the host
    may change `values` as soon as upload() returns. On a CPU, a plain copy."""

    def __init__(self, dst: Tensor, buffers: int = 4):
        self.dst, self.next = dst, 0
        self.pinned = [torch.empty(dst.numel(), dtype=dst.dtype, pin_memory=True)
                       for _ in range(buffers if dst.is_cuda else 0)]  # fmt: skip
        self.views = [b.numpy() for b in self.pinned]  # the same memory, written with numpy
        self.copied = [torch.Event(dst.device) for _ in self.pinned]

    def __call__(self, values: np.ndarray) -> None:
        n = values.size
        if not self.pinned:
            self.dst[:n].copy_(torch.as_tensor(values.reshape(-1), dtype=self.dst.dtype))
            return
        i, self.next = self.next, (self.next + 1) % len(self.pinned)
        self.copied[i].synchronize()  # the copy that last read buffer i has run
        self.views[i][:n] = values.reshape(-1)
        self.dst[:n].copy_(self.pinned[i][:n], non_blocking=True)
        self.copied[i].record()


class Download:
    """download(src) starts copying src (1-d, at most n values) to the host without waiting,
    and returns the host tensor it lands in, with an event recorded after the copy to wait on
    (None on a CPU, where the copy is done at once). On CUDA it lands in pinned buffers of its
    own, allocated once and used in turn: the caller reads each copy before `buffers` more have
    been started, as a step reads its ids before the next step's copy."""

    def __init__(self, n: int, device: torch.device, buffers: int = 4):
        self.next = 0
        self.pinned = [torch.empty(n, dtype=torch.long, pin_memory=True)
                       for _ in range(buffers if device.type == "cuda" else 0)]  # fmt: skip

    def __call__(self, src: Tensor) -> tuple[Tensor, object]:
        if not self.pinned:
            return src.clone(), None
        i, self.next = self.next, (self.next + 1) % len(self.pinned)
        out = self.pinned[i][: len(src)]
        out.copy_(src, non_blocking=True)
        copied = torch.Event(src.device)
        copied.record()
        return out, copied


# The columns of a row's state, on the host (numpy) and on the device (one torch tensor):
LEN, ACTIVE, TOP_K, SEED, TEMPERATURE, TABLE = 0, 1, 2, 3, 4, 5  # TABLE.. : its blocks


@dataclass(eq=False)
class Host:
    """The host twins, one value: a turn's undo puts a whole copy back in one assignment."""

    state: np.ndarray  # (n_rows, 5 + max_blocks) int64: the device state's twin, column by column
    rid: np.ndarray  # (n_rows,) int64, -1: no request
    left: np.ndarray  # (n_rows,) int64: the ids its request may still take, 0: it has finished
    n_out: np.ndarray  # (n_rows,) int64: the ids its request has taken
    held: np.ndarray  # (n_rows,) int64: blocks each row holds
    dirty: np.ndarray  # (n_rows,) bool: changed since the last flush
    moved: np.ndarray  # (2, k) int64: (src, dst) of the moves since the last flush, for tok
    free: np.ndarray  # the blocks no row holds, a stack: changes take from its end
    # moved and free are never written in place (a change binds a new array), so a copy shares them

    def copy(self) -> "Host":
        return Host(self.state.copy(), self.rid.copy(), self.left.copy(), self.n_out.copy(),
                    self.held.copy(), self.dirty.copy(), self.moved, self.free)  # fmt: skip

    def __eq__(self, other) -> bool:
        return isinstance(other, Host) and all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)
        )


@dataclass(eq=False)
class Snapshot:
    """What restore() puts back: the host twins, and the device's `tok` as it was."""

    host: Host
    tok: Tensor

    def __eq__(self, other) -> bool:
        return (isinstance(other, Snapshot) and self.host == other.host
                and torch.equal(self.tok, other.tok))  # fmt: skip


class Rows:
    """n_rows rows of up to max_len positions each. With a block_size (the paged cache),
    each row's positions lie in blocks of block_size, from a pool of n_blocks (default: every
    row at max_len, and the scratch block). Without one (the slot cache, notebook 06), rows
    hold lengths, flags and ids alone.

    On the device, one int64 tensor `state` holds every row's length, active flag, top-k,
    seed, temperature (its float64 bits) and block table, one row each: so a flush writes any
    number of rows with one upload. lens_dev, active_dev, top_k, seed, temperature and
    block_table are views of its columns. tok, the rows' next ids, is its own tensor."""

    def __init__(self, n_rows: int, max_len: int, device, block_size: int | None = 16,
                 n_blocks: int | None = None, limits=LIMITS):  # fmt: skip
        validate_int("n_rows", n_rows, hi=validate_limits(limits).rows)
        validate_int("max_len", max_len, hi=limits.seq_len)
        self.device = validate_device(device)
        if block_size is not None:
            validate_block_size(block_size)
        self.n_rows, self.max_len, self.block_size = n_rows, max_len, block_size
        max_blocks = 0 if block_size is None else -(-max_len // block_size)
        self.max_blocks = max_blocks
        self.columns = np.arange(max_blocks)  # a table's columns, for masks over them
        if n_blocks is not None and block_size is None:
            raise ValueError(f"n_blocks={n_blocks!r:.40} needs a block_size, got block_size=None: "
                             f"rows without one hold no blocks")  # fmt: skip
        if n_blocks is not None:
            validate_int("n_blocks", n_blocks, lo=2, hi=n_rows * max_blocks + 1)
        self.n_blocks = n_rows * max_blocks + 1 if n_blocks is None else n_blocks
        width = TABLE + max_blocks
        self.host = Host(
            state=np.zeros((n_rows, width), np.int64), rid=np.full(n_rows, -1, np.int64),
            left=np.zeros(n_rows, np.int64), n_out=np.zeros(n_rows, np.int64),
            held=np.zeros(n_rows, np.int64), dirty=np.zeros(n_rows, bool),
            moved=np.zeros((2, 0), np.int64),
            free=np.arange(1, self.n_blocks, dtype=np.int64),
        )  # fmt: skip
        # one int64 buffer on the device, so that a flush is one copy: the moves since the
        # last flush (their sources, then their destinations: 2 * n_rows values), then the state
        self.buffer = torch.zeros(2 * n_rows + n_rows * width, dtype=torch.long, device=device)
        self.moves = self.buffer[: 2 * n_rows]
        self.state = self.buffer[2 * n_rows :].view(n_rows, width)
        self.lens_dev, self.active_dev = self.state[:, LEN], self.state[:, ACTIVE]
        self.top_k, self.seed = self.state[:, TOP_K], self.state[:, SEED]
        self.temperature = self.state[:, TEMPERATURE].view(torch.float64)
        self.block_table = self.state[:, TABLE:]
        self.tok = torch.zeros(n_rows, 1, dtype=torch.long, device=device)
        self.upload = Upload(self.buffer)  # the moves, then rows 0..k-1 of the state
        self.unmoved = np.zeros(2 * n_rows, np.int64)  # zeros: the moves' part past k moves
        self.restored_tok: Tensor | None = None  # after restore(): tok as the snapshot held it

    # --- the host twins, read ---------------------------------------------------------------

    @property
    def lens(self) -> np.ndarray:
        return self.host.state[:, LEN]

    @property
    def active(self) -> np.ndarray:
        return self.host.state[:, ACTIVE] != 0

    @property
    def tables_host(self) -> np.ndarray:
        return self.host.state[:, TABLE:]

    @property
    def free(self) -> list[int]:
        return self.host.free.tolist()

    def tables(self) -> list[list[int]]:
        """Each row's blocks, as lists (for reading, not for a step)."""
        h = self.host
        return [h.state[r, TABLE : TABLE + h.held[r]].tolist() for r in range(self.n_rows)]

    def keep(self, t: Tensor) -> None:
        """A buffer's attribute is set only to the buffer itself (`cache.lens_dev += 1` changes
        it in place): the graphs read these tensors, so they are never replaced."""
        if not any(t is b for b in (self.tok, self.lens_dev, self.active_dev, self.block_table)):
            raise ValueError("the rows' buffers are fixed (graphs read them): change them in "
                             "place, never replace them")  # fmt: skip

    def free_rows(self) -> np.ndarray:
        return np.flatnonzero(self.host.state[:, ACTIVE] == 0)

    def in_use(self) -> int:
        """One more than the last row that holds a request (a compact engine's row count)."""
        used = np.flatnonzero(self.host.state[:, ACTIVE])
        return int(used[-1]) + 1 if len(used) else 0

    def blocks_for(self, n_positions) -> np.ndarray:
        n = np.asarray(n_positions, np.int64)
        return np.zeros_like(n) if self.block_size is None else -(-n // self.block_size)

    # --- the doors: rows, lengths and blocks, checked before anything changes --------------

    def validate_rows(self, rows, free: bool | None = None) -> np.ndarray:
        """rows as an int64 array of distinct rows in [0, n_rows) (free=True: each free,
        False: each holding a request); a ValueError naming the row and the limit if not."""
        if isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.ndim == 1:
            r = rows  # the engine's own rows, from numpy: ints already
        else:
            values = list(rows) if isinstance(rows, (list, tuple, range)) else []
            if not values or any(not is_int(v) for v in values):
                raise ValueError(f"rows must be a non-empty list of ints, got {rows!r:.80}")
            far = next((v for v in values if not 0 <= v < self.n_rows), None)
            if far is not None:  # checked as Python ints: 2**63 does not fit an int64
                raise ValueError(f"row {far} outside [0, {self.n_rows})")
            r = np.asarray(values, np.int64)
        if len(r) == 0:
            raise ValueError("rows must be a non-empty list of ints, got none")
        bad = r[(r < 0) | (r >= self.n_rows)]
        if len(bad):
            raise ValueError(f"row {int(bad[0])} outside [0, {self.n_rows})")
        if len(r) > 1 and np.bincount(r, minlength=self.n_rows).max() > 1:
            raise ValueError(f"rows must be distinct, got {r.tolist()}")
        if free is not None:
            wrong = r[(self.host.state[r, ACTIVE] != 0) == free]
            if len(wrong):
                need = "free" if free else "holding a request"
                raise ValueError(f"row {int(wrong[0])} must be {need}: release it or admit it "
                                 f"first")  # fmt: skip
        return r

    def validate_lens(self, rows: np.ndarray, lens, lo: int = 1) -> np.ndarray:
        if isinstance(lens, np.ndarray) and lens.dtype == np.int64 and lens.shape == rows.shape:
            n = lens
        else:
            if is_int(lens):
                values = [lens] * len(rows)
            elif isinstance(lens, (list, tuple, range)):
                values = list(lens)
            else:
                values = None
            if values is None or len(values) != len(rows) or any(not is_int(v) for v in values):
                raise ValueError(f"lengths must be {len(rows)} ints, one a row, got {lens!r:.80}")
            far = next((v for v in values if not lo <= v <= self.max_len), None)
            if far is not None:  # checked as Python ints: 2**63 does not fit an int64
                raise ValueError(f"length {far} outside [{lo}, max_len {self.max_len}]")
            n = np.asarray(values, np.int64)
        bad = n[(n < lo) | (n > self.max_len)]
        if len(bad):
            raise ValueError(f"length {int(bad[0])} outside [{lo}, max_len {self.max_len}]")
        return n

    # --- the changes --------------------------------------------------------------------------

    def take(self, rows, n_positions, *, check: bool = True) -> None:
        """Hand each of `rows` the blocks it lacks for n_positions[i] positions, from the
        free list, on the host (a prefill writes them, then admit() or a prefill graph puts
        the tables on the device). Refused whole if the free list cannot cover them all.
        check=False: the engine's own rows and lengths, numpy int64 arrays checked already."""
        if check:
            rows = self.validate_rows(rows)
            n_positions = self.validate_lens(rows, n_positions)
        r, n, h = rows, n_positions, self.host
        need = np.maximum(self.blocks_for(n) - h.held[r], 0)
        total = int(need.sum())
        if total > len(h.free):
            raise ValueError(f"rows {r.tolist()} need {total} more blocks, {len(h.free)} are "
                             f"free: release a row first")  # fmt: skip
        if total == 0:
            return
        blocks, h.free = h.free[len(h.free) - total :][::-1], h.free[: len(h.free) - total]
        held = h.held[r]
        new = (self.columns >= held[:, None]) & (self.columns < (held + need)[:, None])
        tables = h.state[r, TABLE:]
        tables[new] = blocks  # row by row, each row's new columns in order
        h.state[r, TABLE:] = tables
        h.held[r] = held + need

    def admit(self, rows, lens, temperature=0.0, top_k=0, seed=0, rids=-1, left=0, *,
              upload: bool = True, check: bool = True):  # fmt: skip
        """Rows `rows` take requests of lens[i] positions (their blocks taken already), with
        their sampling arguments, request ids and the ids each may take (each a value for all,
        or one a row).
        upload=False: the device has them already (a prefill graph set them, inside the
        graph); only the host twins follow. check=False: as take's."""
        h = self.host
        if check:
            r = self.validate_rows(rows, free=True)
            n = self.validate_lens(r, lens)
            if (h.held[r] < self.blocks_for(n)).any():
                raise ValueError("admit needs the rows' blocks first: take(rows, lens)")
            per_row(temperature, len(r), "temperature",
                    f"0 or a number in [{MIN_TEMPERATURE}, {MAX_TEMPERATURE:g}]",
                    lambda t: t == 0 or MIN_TEMPERATURE <= t <= MAX_TEMPERATURE,
                    number=True)  # fmt: skip
            per_row(top_k, len(r), "top_k", "an int in [0, 2**31)", lambda k: 0 <= k < 2**31)
            per_row(seed, len(r), "seed", "an int in [0, 2**63)", lambda v: 0 <= v < SEED_LIMIT)
            per_row(rids, len(r), "rids", "an int in [-1, 2**63)", lambda v: -1 <= v < 2**63)
            per_row(
                left, len(r), "left", "an int in [0, max_len]", lambda v: 0 <= v <= self.max_len
            )
        else:
            r, n = rows, lens
        h.state[r, LEN], h.state[r, ACTIVE], h.rid[r], h.left[r], h.n_out[r] = n, 1, rids, left, 0
        h.state[r, TOP_K], h.state[r, SEED] = top_k, seed
        h.state[r, TEMPERATURE] = np.asarray(temperature, np.float64).view(np.int64)
        if upload:
            h.dirty[r] = True
            self.flush()

    def flush(self) -> None:
        """Bring the device into step with the host: rows 0 to the last row changed since the
        last flush written from their host twins, and the moves since then, with one upload
        (self.upload) straight into the buffer, whatever the number of rows; then each moved
        row's tok moved with it. After a restore(), every row, and tok as the snapshot held
        it. The host must be in step for every row it writes (advance_host after a step): a
        row that has not changed is written with the values the device holds already."""
        h = self.host
        if self.restored_tok is not None:
            self.tok.copy_(self.restored_tok)
            h.dirty[:] = True
            self.restored_tok = None
        changed = np.flatnonzero(h.dirty)  # a move marks its rows too
        if len(changed) == 0:
            return
        k, last = h.moved.shape[1], int(changed[-1]) + 1
        self.upload(np.concatenate([h.moved.ravel(), self.unmoved[2 * k :],
                                    h.state[:last].ravel()]))  # fmt: skip
        h.dirty[:last] = False
        if k:  # the moved rows' ids, as the last step sampled them
            src, dst = self.moves[:k], self.moves[k : 2 * k]
            self.tok.index_copy_(0, dst, self.tok.index_select(0, src))
            h.moved = h.moved[:, :0]

    def grow(self) -> None:
        """Before a decode step: every active row whose next position starts a new block
        takes one, from the end of the free list. Vectorised: the rows that cross are found
        with numpy, and marked; the next flush puts their tables on the device."""
        h = self.host
        if self.block_size is None:
            return
        lens, active = h.state[:, LEN], h.state[:, ACTIVE]
        cross = np.flatnonzero(active & (lens >= h.held * self.block_size))
        if len(cross) == 0:
            return
        full = cross[h.held[cross] == self.max_blocks]
        if len(full):
            raise ValueError(f"row {int(full[0])} is full: its {self.max_blocks} blocks hold "
                             f"{self.max_blocks * self.block_size} positions, and a decode step "
                             f"would write one more")  # fmt: skip
        if len(cross) > len(h.free):
            raise ValueError(f"{len(cross)} rows need a block, {len(h.free)} are free")
        k = len(h.free) - len(cross)
        blocks, h.free = h.free[k:][::-1], h.free[:k]
        h.state[cross, TABLE + h.held[cross]] = blocks
        h.held[cross] += 1
        h.dirty[cross] = True

    def release(self, rows, *, check: bool = True) -> None:
        """Free rows: their blocks go back to the free list, each row's last block first;
        their tables point at the scratch block, their lengths are 0. check=False: as take's."""
        r = self.validate_rows(rows) if check else rows
        h = self.host
        held = self.columns[::-1] < h.held[r][:, None]  # each row's blocks, last first
        h.free = np.concatenate([h.free, h.state[r, TABLE:][:, ::-1][held]])
        h.state[r], h.held[r], h.rid[r], h.left[r], h.n_out[r] = 0, 0, -1, 0, 0  # SCRATCH: 0
        h.dirty[r] = True

    def move(self, src, dst, *, check: bool = True) -> None:
        """Move the requests of rows src[i] to the free rows dst[i]: each row's length, table,
        sampling arguments and next id. The K/V stay in their blocks; src rows end free.
        check=False: as take's."""
        s, d = src, dst
        if check:
            s, d = self.validate_rows(src, free=False), self.validate_rows(dst, free=True)
            if len(s) != len(d):
                raise ValueError(f"move takes one destination a row, got {len(s)} and {len(d)}")
        h = self.host
        if h.moved.shape[1]:  # tok moves are applied at once at a flush: never two in a row
            self.flush()
        for a in (h.state, h.held, h.rid, h.left, h.n_out):
            a[d] = a[s]
        h.state[s], h.held[s], h.rid[s], h.left[s], h.n_out[s] = 0, 0, -1, 0, 0
        h.dirty[s], h.dirty[d], h.moved = True, True, np.stack([s, d])

    def compaction(self) -> tuple[np.ndarray, np.ndarray]:
        """The moves that keep the requests in the first rows: each free row below the last
        request takes the last request (src, dst), as one vectorised move."""
        active = self.host.state[:, ACTIVE] != 0
        n = int(active.sum())
        if active[:n].all():  # no hole: nothing moves
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        holes = np.flatnonzero(~active[:n])
        return np.flatnonzero(active[n:])[::-1][: len(holes)] + n, holes

    def advance_host(self) -> None:
        """After a decode step: the host lengths of active rows follow the device's."""
        self.host.state[:, LEN] += self.host.state[:, ACTIVE]

    # --- the undo ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """A copy of the host twins, and of tok (a device copy, queued like a kernel)."""
        return Snapshot(self.host.copy(), self.tok.clone())

    def validate_snapshot(self, saved) -> None:
        """A snapshot() of rows like these: a ValueError if not (the caches' restore door)."""
        if not isinstance(saved, Snapshot):
            raise ValueError(f"restore takes a snapshot() of this cache, got {saved!r:.80}")
        state = saved.host.state
        if state.shape != self.host.state.shape:
            raise ValueError(f"a snapshot of {len(state)} rows, this cache has {self.n_rows}")
        lens = state[:, LEN]
        bad = lens[(lens < 0) | (lens > self.max_len)]
        if len(bad):
            raise ValueError(f"snapshot length {int(bad[0])} outside [0, max_len {self.max_len}]")

    def restore(self, saved: Snapshot) -> None:
        """Put a snapshot() back, on the host: one assignment, which cannot fail. The
        snapshot is used up (the host now is it). The device is marked out of step: the next
        flush() rewrites every row, and tok as the snapshot held it."""
        self.host, self.restored_tok = saved.host, saved.tok

    def settle(self) -> None:
        """Before a turn that writes tok itself (an admission's prefill graph): flush now if
        tok is not as the host expects, after a restore() or with tok moves pending.
        Otherwise nothing: the rows' changes wait for the next flush."""
        if self.restored_tok is not None or self.host.moved.shape[1]:
            self.flush()

    def in_step(self) -> bool:
        """Whether the device holds what the host says (nothing left to flush)."""
        h = self.host
        return self.restored_tok is None and not h.dirty.any() and h.moved.shape[1] == 0


class OnRows:
    """What a cache built on Rows (the slot cache, the paged cache) reads from `self.rows`:
    the host twins as lists, the free rows, and the device buffers, which are the rows' own
    (read them; `x += 1` keeps the same tensor, a new tensor is refused)."""

    rows: Rows

    @property
    def lens(self) -> list[int]:
        return self.rows.lens.tolist()

    @property
    def active(self) -> list[bool]:
        return self.rows.active.tolist()

    def free_slots(self) -> list[int]:
        """The rows that hold no request."""
        return self.rows.free_rows().tolist()

    lens_dev = property(lambda self: self.rows.lens_dev, lambda self, t: self.rows.keep(t))
    active_dev = property(lambda self: self.rows.active_dev, lambda self, t: self.rows.keep(t))


def per_row(value, n: int, name: str, what: str, ok, number: bool = False) -> None:
    """value, one for all n rows or a list of n, each an int (number=True: an int or a float,
    never a bool) for which ok() holds; a ValueError naming the value and `what` if not."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * n
    kind = (int, float) if number else int
    if len(values) != n or any(not isinstance(v, kind) or isinstance(v, bool) or not ok(v)
                               for v in values):  # fmt: skip
        raise ValueError(f"{name} must be {what}, one for all rows or one a row, got "
                         f"{value!r:.80}")  # fmt: skip
