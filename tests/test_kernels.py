"""kernels.paged_decode_attention: the Triton kernels (run by Triton's interpreter on the CPU)
against the PyTorch reference, at block boundaries, lengths 1 and max_len, padded rows and
several head groupings; the custom op seen as one op by the graph simulator and by Dynamo."""

import os
import subprocess
import sys

import pytest
import torch

from tinyllm import generation, kernels
from tinyllm.lab import simgraph

triton_needed = pytest.mark.skipif(kernels.triton is None, reason="Triton installs on Linux")


def inputs(lens, H=4, H_kv=2, D=16, block=16, max_len=64, seed=0):
    """q, pools, a shuffled block table (block 0 left as the scratch) and lens."""
    g = torch.Generator().manual_seed(seed)
    B, per_row = len(lens), -(-max_len // block)
    n_blocks = B * per_row + 1
    k = torch.randn(n_blocks, H_kv, block, D, generator=g)
    v = torch.randn(n_blocks, H_kv, block, D, generator=g)
    table = (torch.randperm(n_blocks - 1, generator=g)[: B * per_row] + 1).view(B, per_row)
    q = torch.randn(B, H, D, generator=g)
    return q, k, v, table.int(), torch.tensor(lens, dtype=torch.int32)


def naive(q, k, v, table, lens):
    """Row by row, head by head: the keys of the row gathered in order, softmax, weights."""
    out = torch.empty_like(q)
    B, H, D = q.shape
    H_kv, block = k.shape[1], k.shape[2]
    for b in range(B):
        n = int(lens[b])
        pos = torch.arange(n)
        blocks = table[b].long()[pos // block]
        for h in range(H):
            keys = k[blocks, h // (H // H_kv), pos % block]
            vals = v[blocks, h // (H // H_kv), pos % block]
            w = torch.softmax(keys @ q[b, h] * D**-0.5, dim=0)
            out[b, h] = w @ vals
    return out


CASES = {  # name → (lens, other inputs, whether the last row is a padded one)
    "one key, a block, a block and one": ([1, 16, 17], {}, False),
    "max_len, and one short of it": ([64, 63, 33], {}, False),
    "a padded row: the scratch block, length 1": ([40, 1], {}, True),
    "one query head per K/V head": ([20, 5], {"H": 2, "H_kv": 2}, False),
    "four query heads per K/V head": ([20, 37], {"H": 8, "H_kv": 2}, False),
    "blocks of 32": ([31, 32, 33], {"block": 32}, False),
}


def case_inputs(case):
    lens, kw, padded = CASES[case]
    q, k, v, table, lens_t = inputs(lens, **kw)
    if padded:
        table[-1] = 0  # a row without a request: every entry the scratch block
    return q, k, v, table, lens_t


@pytest.mark.parametrize("case", CASES)
def test_the_reference_is_attention_over_each_rows_keys(case):
    q, k, v, table, lens = case_inputs(case)
    got = kernels.reference_paged_decode_attention(q, k, v, table, lens)
    torch.testing.assert_close(got, naive(q, k, v, table, lens), atol=1e-5, rtol=1e-5)


@triton_needed
@pytest.mark.parametrize("case", CASES)
def test_the_triton_kernels_compute_the_reference(case):
    q, k, v, table, lens_t = case_inputs(case)
    want = kernels.reference_paged_decode_attention(q, k, v, table, lens_t)
    got = kernels.interpreted_paged_decode_attention(q, k, v, table, lens_t, n_splits=2)
    assert ((got - want).norm() / want.norm()) < 1e-5, case


@triton_needed
@pytest.mark.parametrize("n_splits", [1, kernels.N_SPLITS])
def test_any_number_of_splits_computes_the_same(n_splits):
    """More splits than a row has blocks leave some programs idle: they count for nothing."""
    q, k, v, table, lens = inputs([40, 3], H=2, H_kv=1)
    want = kernels.reference_paged_decode_attention(q, k, v, table, lens)
    got = kernels.interpreted_paged_decode_attention(q, k, v, table, lens, n_splits=n_splits)
    assert ((got - want).norm() / want.norm()) < 1e-5


@triton_needed
@pytest.mark.parametrize("n_splits", [3, 0, -4, 512, 2.0, True, "16", None])
def test_a_count_of_splits_that_is_no_power_of_two_is_refused(n_splits):
    """The combine reads the splits with tl.arange, which takes powers of two only."""
    q, k, v, table, lens = inputs([40, 3], H=2, H_kv=1)
    with pytest.raises(ValueError, match=r"n_splits must be a power of two from 1 to 256"):
        kernels.interpreted_paged_decode_attention(q, k, v, table, lens, n_splits=n_splits)


@triton_needed
def test_the_kernel_runs_under_triton_interpret_set_before_import():
    """TRITON_INTERPRET=1 is read when a kernel is decorated: in its own process, set before
    tinyllm.kernels is imported, the module's own kernels are the interpreted ones."""
    code = (
        "import torch; from tinyllm import kernels as K;"
        "from triton.runtime.interpreter import InterpretedFunction as I;"
        "assert isinstance(K.split_kernel, I);"
        "g = torch.Generator().manual_seed(0);"
        "k = torch.randn(5, 2, 16, 16, generator=g); v = torch.randn(5, 2, 16, 16, generator=g);"
        "q = torch.randn(2, 4, 16, generator=g); t = torch.tensor([[1, 2], [3, 4]]).int();"
        "n = torch.tensor([20, 3]).int();"
        "a = K.triton_paged_decode_attention(q, k, v, t, n);"
        "b = K.reference_paged_decode_attention(q, k, v, t, n);"
        "assert (a - b).norm() / b.norm() < 1e-5; print('ok')"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_the_op_is_the_reference_on_the_cpu():
    q, k, v, table, lens = inputs([40, 7])
    assert torch.equal(
        kernels.paged_decode_attention(q, k, v, table, lens),
        kernels.reference_paged_decode_attention(q, k, v, table, lens),
    )


def test_the_graph_simulator_records_one_op_and_replays_it():
    q, k, v, table, lens = inputs([40, 7])
    g = simgraph.CUDAGraph()
    with simgraph.graph(g):
        out = kernels.paged_decode_attention(q, k, v, table, lens)
    names = [str(func) for func, *_ in g._capture.ops]
    assert names.count("tinyllm.paged_decode_attention.default") == 1, names
    lens += 9  # a longer length, in place: the replay reads it
    g.replay()
    assert torch.equal(out, kernels.reference_paged_decode_attention(q, k, v, table, lens))


def test_dynamo_sees_one_op():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(lambda *a: kernels.paged_decode_attention(*a) * 2, backend=backend)
    q, k, v, table, lens = inputs([40, 7])
    torch.testing.assert_close(f(q, k, v, table, lens), 2 * naive(q, k, v, table, lens))
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if "paged_decode_attention" in str(n.target)]
    assert len(calls) == 1


def _changed(**changes):
    """The arguments of a good call of 2 rows, one changed: (q, k, v, table, lens)."""
    q, k, v, table, lens = inputs([5, 17])
    args = {"q": q, "k": k, "v": v, "table": table, "lens": lens}
    for name, change in changes.items():
        args[name] = change(args[name])
    return tuple(args.values())


BAD_SHAPES = [  # (what, arguments, the message): refused by either path, before any launch
    ("q of 2 dims", _changed(q=lambda q: q[:, 0]), r"q must be \(B, H, D\)"),
    ("head_dim", _changed(q=lambda q: q[..., :8]), r"q's head_dim 8 must be the cache's 16"),
    ("heads", _changed(q=lambda q: q[:, :3]), r"q's 3 heads must be a multiple of the cache's 2"),
    ("fp16 q", _changed(q=lambda q: q.half()), r"share one floating dtype"),
    ("int q", _changed(q=lambda q: q.long()), r"share one floating dtype"),
    ("v another shape", _changed(v=lambda v: v[:, :1]), r"v_cache \(9, 1, 16, 16\) must be"),
    ("float table", _changed(table=lambda t: t.float()), r"block_table must be int32 or int64"),
    ("lens of 3 rows", _changed(lens=lambda n: torch.tensor([5, 17, 2])), r"lens must be int32"),
    ("strided table", _changed(table=lambda t: t.repeat_interleave(2, 1)[:, ::2]),
     r"block_table needs unit stride"),
    ("block of 24", _changed(k=lambda k: k[:, :, :12], v=lambda v: v[:, :, :12]),
     r"block_size 12 must be a power of two"),
]  # fmt: skip


@pytest.mark.parametrize("what, args, message", BAD_SHAPES, ids=[b[0] for b in BAD_SHAPES])
def test_the_op_refuses_bad_shapes_naming_the_argument(what, args, message):
    with pytest.raises(ValueError, match=message):
        kernels.paged_decode_attention(*args)


BAD_VALUES = [  # read on the device: always on a CPU's interpreter, where they would crash it
    ("block 10**6", _changed(table=lambda t: t.index_fill(1, torch.tensor([0]), 10**6)),
     r"block_table holds block 1000000: the pool has blocks \[0, 9\)"),
    ("block -1", _changed(table=lambda t: t.index_fill(1, torch.tensor([0]), -1)),
     r"block_table holds block -1"),
    ("length 2**20", _changed(lens=lambda n: torch.tensor([5, 2**20], dtype=torch.int32)),
     r"lens holds 1048576: each row's length must be in \[1, 64\]"),
    ("length 0", _changed(lens=lambda n: torch.tensor([0, 17], dtype=torch.int32)),
     r"lens holds 0"),
]  # fmt: skip


@triton_needed
@pytest.mark.parametrize("what, args, message", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_the_interpreted_kernels_refuse_values_outside_the_pool(what, args, message):
    with pytest.raises(ValueError, match=message):
        kernels.interpreted_paged_decode_attention(*args, n_splits=2)


@pytest.mark.parametrize("what, args, message", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_check_values_bounds_the_reference_too(what, args, message, monkeypatch):
    monkeypatch.setattr(kernels, "CHECK_VALUES", True)
    with pytest.raises(ValueError, match=message):
        kernels.paged_decode_attention(*args)


# --- rope_write_attend: RoPE, the K/V write and the attention, one kernel a layer -----------


def step_inputs(lens, H=4, H_kv=2, D=16, block=16, max_len=64, seed=1):
    """A layer's projections before RoPE (B, H + 2·H_kv, D), RoPE's tables of random angles
    (max_len, D / 2), pools, a table and each row's keys before the step."""
    q, k, v, table, lens_t = inputs([n + 1 for n in lens], H, H_kv, D, block, max_len, seed)
    g = torch.Generator().manual_seed(seed + 1)
    qkv = torch.randn(len(lens), H + 2 * H_kv, D, generator=g)
    angle = torch.rand(max_len, D // 2, generator=g) * 6
    return qkv, angle.cos(), angle.sin(), k, v, table, lens_t - 1


def rotate(x, cos, sin, lens):
    """model.apply_rope's rotation of x (B, heads, D) at each row's position, written out pair
    by pair from the tables' rows lens[b]."""
    half = x.shape[-1] // 2
    c, s = cos[lens.long()][:, None], sin[lens.long()][:, None]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def test_the_fused_reference_rotates_writes_then_attends():
    qkv, cos, sin, k, v, table, lens = step_inputs([0, 15, 16, 40])
    H = qkv.shape[1] - 2 * k.shape[1]
    k2, v2 = k.clone(), v.clone()
    got = kernels.reference_rope_write_attend(qkv, cos, sin, k, v, table, lens)
    q, new_k = rotate(qkv[:, :H], cos, sin, lens), rotate(qkv[:, H : H + 2], cos, sin, lens)
    for b, n in enumerate(lens.tolist()):  # the new key and value at position n of row b
        block = int(table[b, n // 16])
        k2[block, :, n % 16], v2[block, :, n % 16] = new_k[b], qkv[b, H + 2 :]
    torch.testing.assert_close(k, k2, atol=1e-6, rtol=1e-6)
    assert torch.equal(v, v2)
    torch.testing.assert_close(got, naive(q, k2, v2, table, lens + 1), atol=1e-5, rtol=1e-5)


@triton_needed
@pytest.mark.parametrize("n_splits", [1, 2, 4])
def test_the_fused_kernel_computes_the_reference(n_splits):
    """One split: the kernel writes the output itself; more: partials, then combine. The
    table of 4 blocks in 1 or 2 splits takes the tensor cores' form, in 4 the sums'. The
    table and lengths are columns of one state tensor, as the paged step hands them over."""
    args = step_inputs([0, 15, 16, 17, 63], H=8, H_kv=2)
    mine = [a.clone() for a in args]
    state = torch.cat([mine[6][:, None], torch.ones_like(mine[6])[:, None], mine[5]], dim=1)
    mine[5], mine[6] = state[:, 2:], state[:, 0]  # strided views, not tensors of their own
    want = kernels.reference_rope_write_attend(*args)
    got = kernels.interpreted_rope_write_attend(*mine, n_splits=n_splits)
    assert ((got - want).norm() / want.norm()) < 1e-5
    torch.testing.assert_close(mine[3], args[3], atol=1e-6, rtol=1e-6)  # the keys written
    assert torch.equal(mine[4], args[4])  # the values


@triton_needed
def test_a_long_split_is_read_a_few_blocks_a_pass():
    """A table of 8 blocks in one split: DOT_CHUNK blocks a pass, the loop's last pass short."""
    args = step_inputs([0, 15, 16, 100, 120], H=8, H_kv=2, max_len=128)
    assert kernels.split_passes(args[5].shape[1], 1) == (kernels.DOT_CHUNK, kernels.DOT_STAGES)
    mine = [a.clone() for a in args]
    want = kernels.reference_rope_write_attend(*args)
    got = kernels.interpreted_rope_write_attend(*mine, n_splits=1)
    assert ((got - want).norm() / want.norm()) < 1e-5
    torch.testing.assert_close(mine[3], args[3], atol=1e-6, rtol=1e-6)


@triton_needed
@pytest.mark.parametrize("n_splits", [1, 4])
def test_the_fused_kernels_shares_combine_to_the_reference(n_splits):
    """splits=True: no combine, the partials back; combined, they are the op's output. With
    four splits the short rows leave splits empty: max -inf, weight 0 (row 0 holds one key)."""
    args = step_inputs([0, 15, 16, 63], H=8, H_kv=2)
    mine = [a.clone() for a in args]
    want = kernels.reference_rope_write_attend(*args)
    part, m, w = kernels.interpreted_rope_write_attend(*mine, n_splits=n_splits, splits=True)
    assert part.shape == (4, 8, n_splits, 16) and m.shape == w.shape == (4, 8, n_splits)
    got = kernels.reference_combine(part, m, w)
    assert ((got - want).norm() / want.norm()) < 1e-5
    assert bool((m[0, :, 1:] == float("-inf")).all()) and bool(m[:, :, 0].isfinite().all())


def test_the_splits_op_on_the_cpu_is_the_output_as_one_split():
    """On the CPU rope_write_splits returns the whole row as one split, already divided by
    its weight: combined, it is rope_write_attend's output bit for bit."""
    args = step_inputs([3, 9, 40])
    mine = [a.clone() for a in args]
    part, m, w = kernels.rope_write_splits(*mine)
    assert part.shape == (3, 4, 1, 16) and torch.equal(m, torch.zeros(3, 4, 1))
    want = kernels.rope_write_attend(*args)
    assert torch.equal(kernels.reference_combine(part, m, w).to(want.dtype), want)
    assert torch.equal(mine[3], args[3]) and torch.equal(mine[4], args[4])  # the same writes


def test_tensor_cores_take_a_split_of_more_than_one_block():
    # the shipped model's table of 64 blocks: one row's 64 splits, 8 rows' 16, 256 rows' 1
    assert [kernels.tensor_cores(64, s) for s in (64, 32, 16, 1)] == [False, True, True, True]
    assert not kernels.tensor_cores(3, 4) and kernels.tensor_cores(3, 2)


def test_a_split_of_a_few_blocks_is_read_in_one_pass():
    # 32 splits of 2 blocks, 16 of 4: one pass; 8 of 8 and 1 of 64: DOT_CHUNK blocks a pass
    long = (kernels.DOT_CHUNK, kernels.DOT_STAGES)
    assert [kernels.split_passes(64, s) for s in (32, 16, 8, 1)] == [(2, 1), (4, 1), long, long]
    assert kernels.split_passes(64, 64) == (1, 1)  # one block: the sums' walk
    assert kernels.split_passes(3, 1) == (4, 1)  # 3 blocks: a power of two, the last masked


def test_the_split_count_fills_the_gpu_and_is_one_for_large_batches():
    got = [kernels.split_count(b, 4, "cpu") for b in (1, 2, 4, 8, 33, 129, 256)]
    assert got == [64, 64, 32, 16, 4, 1, 1]


def test_the_fused_op_checks_its_arguments_at_its_door():
    qkv, cos, sin, k, v, table, lens = step_inputs([3, 9])
    with pytest.raises(ValueError, match=r"cos must be RoPE's table, \(positions, D / 2\)"):
        kernels.rope_write_attend(qkv, cos[:, :4], sin, k, v, table, lens)
    with pytest.raises(ValueError, match=r"sin must be RoPE's table"):
        kernels.rope_write_attend(qkv, cos, sin[:10], k, v, table, lens)
    with pytest.raises(ValueError, match="qkv's 4 heads"):
        kernels.rope_write_attend(qkv[:, :4], cos, sin, k, v, table, lens)


def test_the_fused_op_bounds_the_lengths_by_ropes_tables_with_values():
    """values=True reads the lengths: a row whose position is past RoPE's tables is named."""
    qkv, cos, sin, k, v, table, lens = step_inputs([3, 9])
    kernels.validate_step_args(qkv, cos, sin, k, v, table, lens, values=True)  # within: no error
    with pytest.raises(ValueError, match=r"RoPE's tables hold positions \[0, 8\)"):
        kernels.validate_step_args(qkv, cos[:8], sin[:8], k, v, table, lens, values=True)


# --- the compiler's view: what the interpreter lets pass ------------------------------------

COMPILE_FOR_HOPPER = """
import sys
from triton import compile
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tinyllm import kernels, projections
from tinyllm.lab import floor

POINTERS = {"Q": "*bf16", "QKV": "*bf16", "COS": "*bf16", "SIN": "*bf16", "K": "*bf16",
            "V": "*bf16", "OUT": "*bf16", "TABLE": "*i32", "LENS": "*i32", "PART": "*fp32",
            "MAX": "*fp32", "SUM": "*fp32", "scale": "fp32", "X": "*fp32", "NORM_W": "*bf16",
            "W": "*bf16", "RES": "*bf16", "eps": "fp32", "count_ptr": "*i32"}


def ptx(kernel, constexprs):
    names = list(kernel.arg_names)
    signature = {n: POINTERS.get(n, "constexpr" if n in constexprs else "i32") for n in names}
    consts = {(names.index(n),): v for n, v in constexprs.items()}
    src = ASTSource(fn=kernel, signature=signature, constexprs=consts)
    return compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]


shape = {"G": 2, "G_PAD": 2, "D": 32, "BLOCK": 16, "N_SPLITS": 16, "PDL": True}
plain = {"DOT": False, "CHUNK": 1, "STAGES": 1}
dot = {"DOT": True, "CHUNK": kernels.DOT_CHUNK, "STAGES": kernels.DOT_STAGES, "G_PAD": 16}
fused = ptx(kernels.fused_kernel, {"H": 8, "PARTIALS": True, **shape, **plain})
POINTERS.update(TABLE="*i64", LENS="*i64")  # as the paged step hands them: its int64 state
ptx(kernels.fused_kernel, {"H": 8, "PARTIALS": False, **shape, **plain})
ptx(kernels.fused_kernel, {"H": 8, "PARTIALS": True, **shape, **dot})
ptx(kernels.fused_kernel, {"H": 8, "PARTIALS": True, **shape, **dot, "CHUNK": 4, "STAGES": 1})
ptx(kernels.fused_kernel, {"H": 8, "PARTIALS": False, **shape, **dot})
POINTERS.update(TABLE="*i32", LENS="*i32")
split = ptx(kernels.split_kernel, shape)
combine = ptx(kernels.combine_kernel, {"D": 32, "N_SPLITS": kernels.STEP_SPLITS, "PDL": False})
folded = ptx(projections.projection_kernel, {  # the output projection, combining 64 splits
    "K": 256, "K_PAD": 256, "BLOCK_N": projections.BLOCK_N, "BLOCK_B": 1, "NORM": False,
    "SWIGLU": False, "ADD": True, "COMBINE": True, "D": 32, "N_SPLITS": kernels.STEP_SPLITS,
    "PRECISION": "mma", "PDL": True})
one_row = ptx(projections.projection_kernel, {  # one row's gate and up, its programs' size
    "K": 256, "K_PAD": 256, "BLOCK_N": projections.ROW_BLOCK_N, "BLOCK_B": 1, "NORM": True,
    "SWIGLU": True, "ADD": False, "COMBINE": False, "D": 1, "N_SPLITS": 1, "PRECISION": "mma",
    "PDL": True})
barrier = ptx(floor.barrier_kernel(), {"K": 4, "SPINS": 1024})  # lab.floor's barriers
POINTERS.update(LOGITS="*bf16", TEMPERATURE="*fp64", TOP_K="*i64", SEED="*i64",
                POSITION="*i64", IDS="*i64")
sampler = ptx(kernels.sample_kernel, {"V_PAD": 512, "PDL": True})
print("griddepcontrol.wait" in fused, "griddepcontrol.wait" in split, "griddepcontrol" in combine,
      "griddepcontrol.wait" in folded, "griddepcontrol.wait" in one_row,
      "griddepcontrol.wait" in sampler, "div.rn.f32" in sampler, "lg2.approx" in sampler)
"""


@triton_needed
def test_the_kernels_compile_for_a_hopper_gpu():
    """Triton's compiler, for an H100/H200 (sm_90), on this machine with no GPU: its front end,
    its passes and ptxas. The interpreter runs a kernel as Python, so a kernel it runs may
    still be one the compiler refuses (a name given a new shape inside a branch, say). In a
    process of its own: the interpreter leaves Triton's language patched behind it."""
    out = subprocess.run([sys.executable, "-c", COMPILE_FOR_HOPPER], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[:6] == ["True", "True", "False", "True", "True", "True"]  # PDL
    assert out.stdout.split()[6:] == ["True", "False"]  # the sampler divides and logs as torch


def sampling_case(B, V, dtype, seed=0):
    """Logits with a tie at each row's top, rows greedy and drawn, top-k of 0, 1, some, V and
    past V, seeds at both ends, positions in int32; temperature a column of an int64 table
    viewed as float64, as rows.Rows keeps it (a stride of 3)."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(B, V, generator=g) * 3).to(dtype)
    logits[:, 7] = logits[:, 3] = logits.amax(dim=1) + 1  # ties at the top: the first wins
    table = torch.zeros(B, 3, dtype=torch.int64)
    t = table.view(torch.float64)[:, 1]
    t.copy_(torch.rand(B, generator=g, dtype=torch.float64) * 2)
    t[::3] = 0.0
    top_k = torch.tensor([0, 1, 5, V, V + 4] * B)[:B]
    seed = torch.randint(0, 2**62, (B,), generator=g)
    seed[0], seed[-1] = 0, 2**63 - 1
    position = torch.randint(0, 1024, (B,), generator=g, dtype=torch.int32)
    return logits, t, top_k, seed, position


@pytest.mark.parametrize(("B", "V", "dtype"), [(6, 258, torch.bfloat16), (5, 64, torch.float32)])
def test_the_interpreted_sampler_draws_the_reference_ids(B, V, dtype):
    case = sampling_case(B, V, dtype)
    got = kernels.interpreted_sample(*case)
    want = generation.reference_sample(*case)
    assert got.dtype == torch.long and got.tolist() == want.tolist()
    assert got[0] == 3  # greedy, and the first of the tied ids
    assert not (got == generation.reference_sample(*sampling_case(B, V, dtype, seed=1))).all()
    logits = case[0].t().contiguous().t()  # the same values, a column at a time in memory
    assert kernels.interpreted_sample(logits, *case[1:]).tolist() == want.tolist()


def test_the_sampler_is_one_op_that_runs_the_reference_off_cuda():
    case = sampling_case(7, 258, torch.bfloat16)
    g = simgraph.CUDAGraph()
    with simgraph.graph(g):
        got = generation.sample(*case)
    assert [str(func) for func, *_ in g._capture.ops] == ["tinyllm.sample.default"]
    case[3].add_(1)  # new seeds, in place: the replay reads them
    g.replay()
    assert got.tolist() == generation.reference_sample(*case).tolist()
