"""Rows, the step inputs of a batch with one owner: its moves keep host and device twins in
step, touch any number of rows with the same torch ops, and its doors refuse bad rows,
lengths and blocks before anything changes."""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tinyllm.rows import SCRATCH, Rows


def in_step(rows: Rows):
    """After a flush the device holds what the host says, and every block is held once."""
    rows.flush()
    h = rows.host
    assert rows.lens_dev.tolist() == rows.lens.tolist()
    assert rows.active_dev.tolist() == rows.active.astype(int).tolist()
    assert rows.block_table.tolist() == rows.tables_host.tolist()
    assert rows.state.tolist() == h.state.tolist()
    held = [b for r in range(rows.n_rows) for b in rows.tables_host[r, : h.held[r]].tolist()]
    assert sorted(held + rows.free) == list(range(1, rows.n_blocks))
    past = np.arange(rows.max_blocks)[None, :] >= h.held[:, None]
    assert (rows.tables_host[past] == SCRATCH).all()


def test_the_moves_keep_host_and_device_in_step():
    rows = Rows(6, 64, "cpu", block_size=16)
    assert rows.n_blocks == 6 * 4 + 1 and rows.free == list(range(1, 25))
    rows.take([0, 2, 5], [17, 5, 32])
    rows.admit([0, 2, 5], [17, 5, 32], temperature=[0.0, 0.5, 1.0], top_k=[0, 7, 0],
               seed=[1, 2, 3], rids=[10, 11, 12])  # fmt: skip
    assert rows.tables()[:3] == [[24, 23], [], [22]] and rows.in_use() == 6
    in_step(rows)
    for _ in range(16):  # rows 0 and 5 cross into new blocks at 32 and 32
        rows.grow()
        rows.lens_dev.add_(rows.active_dev)  # what a decode step's end_step does
        rows.advance_host()
        in_step(rows)
    assert rows.lens.tolist() == [33, 0, 21, 0, 0, 48] and rows.host.held.tolist()[5] == 3
    rows.tok.copy_(torch.arange(6)[:, None] * 100)
    rows.release([2])
    src, dst = rows.compaction()
    assert src.tolist() == [5] and dst.tolist() == [1]  # the last request fills the first hole
    rows.move(src, dst)
    in_step(rows)
    assert rows.lens.tolist() == [33, 48, 0, 0, 0, 0] and rows.host.rid.tolist()[:2] == [10, 12]
    assert rows.tok[:2, 0].tolist() == [0, 500]  # the moved row's next id moved with it
    assert rows.temperature.tolist()[:2] == [0.0, 1.0] and rows.in_use() == 2


def test_grow_refuses_a_full_row_and_changes_nothing():
    rows = Rows(2, 32, "cpu", block_size=16)
    rows.take([0, 1], [31, 4])
    rows.admit([0, 1], [31, 4])
    rows.grow()
    rows.lens_dev.add_(rows.active_dev)  # a step: row 0 writes its last position, 31
    rows.advance_host()
    before = rows.host.state.copy(), list(rows.free)
    with pytest.raises(ValueError, match=r"row 0 is full: its 2 blocks hold 32 positions"):
        rows.grow()
    assert np.array_equal(rows.host.state, before[0]) and rows.free == before[1]


def test_restore_is_one_assignment_and_the_next_flush_rewrites_the_device():
    rows = Rows(4, 32, "cpu", block_size=8)
    rows.take([0, 1], [9, 3])
    rows.admit([0, 1], [9, 3], rids=[0, 1])
    rows.tok.fill_(7)
    saved = rows.snapshot()
    rows.release([0])
    rows.grow()
    rows.tok.fill_(9)
    rows.lens_dev.fill_(99)  # a step that ran on the device, then was undone
    rows.restore(saved)
    assert not rows.in_step() and rows.lens.tolist() == [9, 3, 0, 0]
    in_step(rows)
    assert rows.tok.flatten().tolist() == [7] * 4 and rows.in_step()


def kernels(fn) -> list[str]:
    """The aten ops fn() dispatches that are not views: each a kernel on a GPU."""
    seen = []

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return seen


def test_a_move_issues_the_same_ops_for_one_row_as_for_many():
    """Vectorised: the flush of 1 changed row and of 40 issues the same torch ops."""

    def ops(k):
        rows = Rows(64, 64, "cpu", block_size=16)
        r = list(range(k))
        rows.take(r, [16] * k)
        rows.admit(r, [16] * k, upload=False)
        rows.grow()  # every one of the k rows crosses into its second block
        return kernels(rows.flush)

    assert ops(1) == ops(40) and len(ops(1)) > 0


BAD = [  # (what, the call on a Rows of 4 rows of 32 positions, row 1 holding 5, the message)
    ("row -1", lambda r: r.take([-1], [3]), r"row -1 outside \[0, 4\)"),
    ("row 4", lambda r: r.take([4], [3]), r"row 4 outside \[0, 4\)"),
    ("row True", lambda r: r.take([True], [3]), r"rows must be a non-empty list of ints"),
    ("row 1.0", lambda r: r.release([1.0]), r"rows must be a non-empty list of ints"),
    ("no rows", lambda r: r.release([]), r"rows must be a non-empty list of ints"),
    ("rows 2", lambda r: r.release(2), r"rows must be a non-empty list of ints"),
    ("rows twice", lambda r: r.take([0, 0], [3, 3]), r"rows must be distinct, got \[0, 0\]"),
    ("length 0", lambda r: r.take([0], [0]), r"length 0 outside \[1, max_len 32\]"),
    ("length 33", lambda r: r.take([0], [33]), r"length 33 outside \[1, max_len 32\]"),
    ("length -1", lambda r: r.admit([0], [-1]), r"length -1 outside"),
    ("length True", lambda r: r.take([0], [True]), r"lengths must be 1 ints, one a row"),
    ("two lengths, one row", lambda r: r.take([0], [3, 4]), r"lengths must be 1 ints"),
    (
        "more blocks than free",
        lambda r: r.take([0, 2, 3], [32, 32, 32]),
        r"need 12 more blocks, 10 are free",
    ),  # fmt: skip
    ("admit a row in use", lambda r: r.admit([1], [3]), r"row 1 must be free"),
    ("admit without blocks", lambda r: r.admit([0], [3]), r"admit needs the rows' blocks first"),
    ("move from a free row", lambda r: r.move([0], [2]), r"row 0 must be holding a request"),
    ("move onto a row in use", lambda r: r.move([1], [1]), r"row 1 must be free"),
    ("move, one row to two", lambda r: r.move([1], [2, 3]), r"one destination a row"),
    ("restore junk", lambda r: r.validate_snapshot({"lens": [0] * 4}), r"a snapshot\(\)"),
    (
        "restore another size",
        lambda r: r.validate_snapshot(Rows(3, 32, "cpu", 8).snapshot()),
        r"a snapshot of 3 rows, this cache has 4",
    ),  # fmt: skip
]


@pytest.mark.parametrize("what, call, message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_call_is_refused_before_anything_changes(what, call, message):
    rows = Rows(4, 32, "cpu", block_size=8, n_blocks=12)
    rows.take([1], [5])
    rows.admit([1], [5], rids=[0])
    before = rows.snapshot()
    with pytest.raises(ValueError, match=message):
        call(rows)
    h, b = rows.host, before.host
    for name in ("state", "rid", "held"):
        assert np.array_equal(getattr(h, name), getattr(b, name)), name
    assert np.array_equal(h.free, b.free) and rows.in_step()
