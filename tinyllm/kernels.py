"""The decode-attention kernel of the paged cache (notebook 08), written for the job.

    out = paged_decode_attention(q, k_cache, v_cache, block_table, lens)

q (B, H, D): one query per row. k_cache, v_cache (n_blocks, H_kv, block_size, D): one layer's
pool of key and value blocks. block_table (B, max_blocks) int32 or int64, any row stride:
row b's keys are at positions 0, 1, ... of its blocks block_table[b, 0], block_table[b, 1],
... lens (B,) int32 or int64: row b attends to its first lens[b] keys. Returns (B, H, D);
query head h reads K/V head h // G, where G = H / H_kv query heads share each K/V head.

Nothing in a call depends on a host value of the lengths or the block ids: the launch grid is
(B, H_kv, n_splits), a function of the batch alone, and each program reads its row's length
and block ids on the device. So one CUDA graph replays it at every length (FlashInfer's rule
for graph-safe attention), with no window and no mask tensor.

It is a torch custom op (torch.library), so that torch.compile, CUDA graphs and
lab.simgraph each see one op:
- on CUDA, Triton: split-K ("flash decoding"). Program (b, g, s) takes the s-th split of
  row b's blocks, runs the online softmax over them for the G query heads of K/V head g, and
  writes its unnormalised sum, its running max and its sum of weights; a second kernel,
  program (b, h), combines the n_splits partials of query head h.
- elsewhere, the PyTorch reference: gather every block of the row through the table, mask
  the keys past its length, softmax. The same function, slower.
On Hopper GPUs and later, each kernel launches with PDL (programmatic dependent launch,
notebook 11): it may start while the kernel before it finishes, and waits for it at
gdc_wait() before it reads anything. The Triton kernels also run on a CPU under Triton's
interpreter, for the tests and the lesson: interpreted_paged_decode_attention() builds them
so, whatever TRITON_INTERPRET says (the variable is read once, when a kernel is decorated).

The file ends with the sampler's kernel, sample_kernel: generation.sample's draw, one program
a row, in one launch where its tensor ops took about seventy (notebook 11, section 8).
"""

import contextlib
import os

import torch
from torch import Tensor

try:  # Triton ships with torch's CUDA builds, and installs on Linux; elsewhere: the reference
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
except ImportError:  # macOS, Windows: the kernels' bodies below are never run
    triton = None

    class tl:  # what their annotations name
        constexpr = None


# Bound every block id and length of a call on the device too (a device read, so a sync, and
# not inside a graph's capture): TINYLLM_CHECK_KERNEL_VALUES=1. On a CPU, under Triton's
# interpreter, values are always bounded: a read outside the pool there kills the process.
CHECK_VALUES = os.environ.get("TINYLLM_CHECK_KERNEL_VALUES") == "1"


def pdl_launch(device) -> dict:
    """The launch options of the course's kernels on `device`: with PDL (the kernel's PDL flag
    and Triton's launch_pdl) on CUDA GPUs of compute capability 9 and up (Hopper, Blackwell),
    as Inductor's triton.enable_pdl does; elsewhere none."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 9:
        return {"PDL": True, "launch_pdl": True}
    return {}


def validate_paged_args(q, k_cache, v_cache, block_table, lens, values: bool = False) -> None:
    """The kernel's door: a ValueError naming the argument, its shape and what was expected.
    Shapes, dtypes, devices and strides are read on the host, with no device read, so the
    check is safe inside a graph's capture. values=True also bounds the lengths to [1, the
    table's positions] and the block ids to the pool, which reads them from the device."""
    args = {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": block_table,
            "lens": lens}  # fmt: skip
    for name, t in args.items():
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, q on {q.device}: one device for all")
    if q.ndim != 3 or k_cache.ndim != 4:
        raise ValueError(f"q must be (B, H, D) and k_cache (n_blocks, H_kv, block_size, D), got "
                         f"{tuple(q.shape)} and {tuple(k_cache.shape)}")  # fmt: skip
    B, H, D = q.shape
    n_blocks, H_kv, block_size, D_kv = k_cache.shape
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache {tuple(v_cache.shape)} must be shaped as k_cache "
                         f"{tuple(k_cache.shape)}")  # fmt: skip
    if not q.dtype.is_floating_point or not q.dtype == k_cache.dtype == v_cache.dtype:
        raise ValueError(f"q, k_cache and v_cache must share one floating dtype, got "
                         f"{q.dtype}, {k_cache.dtype} and {v_cache.dtype}")  # fmt: skip
    if D != D_kv:
        raise ValueError(f"q's head_dim {D} must be the cache's {D_kv}")
    if H_kv == 0 or H % H_kv:
        raise ValueError(f"q's {H} heads must be a multiple of the cache's {H_kv} K/V heads")
    if block_size & (block_size - 1) or block_size == 0:
        raise ValueError(f"the cache's block_size {block_size} must be a power of two")
    for name, t, ndim in (("block_table", block_table, 2), ("lens", lens, 1)):
        if t.dtype not in (torch.int32, torch.int64) or t.ndim != ndim or t.shape[0] != B:
            want = "(B, max_blocks)" if ndim == 2 else "(B,)"
            raise ValueError(f"{name} must be int32 or int64 of shape {want} with B = {B}, got "
                             f"{t.dtype} {tuple(t.shape)}")  # fmt: skip
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride() != k_cache.stride():
        raise ValueError("q, k_cache and v_cache need unit stride along head_dim, and v_cache "
                         "k_cache's strides: pass contiguous tensors")  # fmt: skip
    if block_table.stride(-1) != 1:
        raise ValueError("block_table needs unit stride along its blocks: pass a contiguous one")
    if values:
        most = block_table.shape[1] * block_size
        if bool(((lens < 1) | (lens > most)).any()):
            bad = int(lens[(lens < 1) | (lens > most)][0])
            raise ValueError(f"lens holds {bad}: each row's length must be in [1, {most}], "
                             f"the positions its table holds")  # fmt: skip
        if bool(((block_table < 0) | (block_table >= n_blocks)).any()):
            bad = int(block_table[(block_table < 0) | (block_table >= n_blocks)][0])
            raise ValueError(f"block_table holds block {bad}: the pool has blocks "
                             f"[0, {n_blocks})")  # fmt: skip


def validate_splits(n_splits) -> int:
    """The count of splits of each row's keys in a launch: a power of two (the combine reads them
    with tl.arange, which takes powers of two only), from 1 to 256."""
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or not (
            1 <= n_splits <= 256 and n_splits & (n_splits - 1) == 0):  # fmt: skip
        raise ValueError(f"n_splits must be a power of two from 1 to 256, got {n_splits!r}")
    return n_splits


# Splits of a row's blocks, each its own program (the grid's third axis), and the warps of a
# program: the fastest of 4, 8 and 16 splits and 1, 2 and 4 warps for 16-position blocks in the
# shipped model's step on the H200 (results/probes/, 2026-12-01: 16 and 2).
N_SPLITS = 16
NUM_WARPS = 2
# STEP_SPLITS: the most splits that split_count gives the paged step's op: at 1024 keys, one
# block of 16 a split.
STEP_SPLITS = 64
# The fused kernel on tensor cores (tensor_cores, split_passes): a split of up to WHOLE_SPLIT
# blocks is read in one pass of its loop; a longer one DOT_CHUNK blocks a pass, their loads
# pipelined in DOT_STAGES stages (Triton's num_stages), with NUM_WARPS warps. Of 13 forms
# tried on the H200, 2 blocks in 3 stages gave the fastest op at batch 256
# (results/h200_dot.json, part "variants").
WHOLE_SPLIT = 4
DOT_CHUNK = 2
DOT_STAGES = 3


def reference_paged_decode_attention(q, k_cache, v_cache, block_table, lens) -> Tensor:
    """The same function in PyTorch: gather every block of each row, mask past its length."""
    B, H, D = q.shape
    _, H_kv, block_size, _ = k_cache.shape
    G, L = H // H_kv, block_table.shape[1] * block_size
    rows = block_table.long()
    k = k_cache[rows].transpose(1, 2).reshape(B, H_kv, L, D)  # (B, H_kv, blocks·block_size, D)
    v = v_cache[rows].transpose(1, 2).reshape(B, H_kv, L, D)
    scores = torch.einsum("bhgd,bhtd->bhgt", q.view(B, H_kv, G, D).float(), k.float()) * D**-0.5
    past = torch.arange(L, device=q.device) >= lens.view(B, 1, 1, 1)  # keys past the length
    weights = torch.softmax(scores.masked_fill(past, float("-inf")), dim=-1)
    return torch.einsum("bhgt,bhtd->bhgd", weights, v.float()).reshape(B, H, D).to(q.dtype)


# --- the Triton kernels ---------------------------------------------------------------------


def split_kernel_body(Q, K, V, TABLE, LENS, PART, MAX, SUM, scale,
                      q_row, q_head, k_block, k_head, k_pos, table_row,
                      part_row, part_head, part_split, max_row, max_head,
                      G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                      BLOCK: tl.constexpr, N_SPLITS: tl.constexpr,
                      PDL: tl.constexpr = False):  # fmt: skip
    """Program (b, g, s): the online softmax of K/V head g's G query heads over the s-th split
    of row b's blocks; its unnormalised sum, max and sum of weights into PART, MAX, SUM.
    PDL: launched early, it waits for the kernel before (notebook 11, section 5)."""
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    n_keys = tl.load(LENS + b)  # read on the device: the grid does not depend on it
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    heads = g * G + tl.arange(0, G_PAD)  # this K/V head's query heads (padded to a power of 2)
    real = tl.arange(0, G_PAD) < G
    d, t = tl.arange(0, D), tl.arange(0, BLOCK)
    q = tl.load(Q + b * q_row + heads[:, None] * q_head + d[None, :], mask=real[:, None], other=0.0)
    q = q.to(tl.float32) * scale
    m = tl.full([G_PAD], float("-inf"), tl.float32)  # running max of the scores
    w = tl.zeros([G_PAD], tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([G_PAD, D], tl.float32)  # running sum of exp(score - m) · v
    for i in range(first, last):
        block = tl.load(TABLE + b * table_row + i)
        at = block * k_block + g * k_head + t[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)  # (BLOCK, D)
        v = tl.load(V + at).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)  # (G_PAD, BLOCK)
        scores = tl.where((i * BLOCK + t)[None, :] < n_keys, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
    tl.store(out, acc, mask=real[:, None])
    tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
    tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


def combine_kernel_body(PART, MAX, SUM, OUT, part_row, part_head, part_split, max_row,
                        max_head, out_row, out_head, D: tl.constexpr,
                        N_SPLITS: tl.constexpr, PDL: tl.constexpr = False):  # fmt: skip
    """Program (b, h): query head h of row b from the n_splits partials (a split that had no
    block has max -inf and weight 0, and counts for nothing). PDL: launched early, it waits
    for the kernel before (notebook 11, section 5)."""
    b, h = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    s, d = tl.arange(0, N_SPLITS), tl.arange(0, D)
    m = tl.load(MAX + b * max_row + h * max_head + s)
    w = tl.load(SUM + b * max_row + h * max_head + s)
    scale = tl.exp(m - tl.max(m, axis=0))
    part = tl.load(PART + b * part_row + h * part_head + s[:, None] * part_split + d[None, :])
    out = tl.sum(scale[:, None] * part, axis=0) / tl.sum(scale * w, axis=0)
    tl.store(OUT + b * out_row + h * out_head + d, out.to(OUT.dtype.element_ty))


if triton is not None:
    split_kernel, combine_kernel = triton.jit(split_kernel_body), triton.jit(combine_kernel_body)


def reference_combine(part, m, w) -> Tensor:
    """combine_kernel's job in PyTorch: each row's and head's splits, part (B, H, S, D) with
    their maxima m and sums of weights w (B, H, S), into the output (B, H, D), in float32."""
    scale = torch.exp(m - m.amax(dim=2, keepdim=True))
    return (scale[..., None] * part).sum(2) / (scale * w).sum(2)[..., None]


def launch_combine(part, m, w, out, combine=None) -> Tensor:
    """combine_kernel over the splits part, m, w into out (B, H, D): grid (B, H)."""
    B, H, n_splits, D = part.shape
    (combine or combine_kernel)[(B, H)](
        part, m, w, out, part.stride(0), part.stride(1), part.stride(2), m.stride(0),
        m.stride(1), out.stride(0), out.stride(1), D=D, N_SPLITS=n_splits, num_warps=1,
        **pdl_launch(out.device),
    )  # fmt: skip
    return out


def triton_paged_decode_attention(
    q, k_cache, v_cache, block_table, lens, kernels=None, n_splits=N_SPLITS, num_warps=NUM_WARPS
) -> Tensor:
    """Launch the two kernels (kernels: a (split, combine) pair, default the compiled ones),
    after the door (validate_paged_args; values too on a CPU, or with CHECK_VALUES)."""
    validate_paged_args(q, k_cache, v_cache, block_table, lens,
                        values=CHECK_VALUES or q.device.type == "cpu")  # fmt: skip
    validate_splits(n_splits)
    split, combine = kernels or (split_kernel, combine_kernel)
    pdl = pdl_launch(q.device)
    B, H, D = q.shape
    _, H_kv, block_size, _ = k_cache.shape
    G = H // H_kv
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=q.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=q.device)
    w = torch.empty_like(m)
    out = torch.empty_like(q)
    split[(B, H_kv, n_splits)](
        q, k_cache, v_cache, block_table, lens, part, m, w, D**-0.5,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_table.stride(0), part.stride(0), part.stride(1), part.stride(2),
        m.stride(0), m.stride(1),
        G=G, G_PAD=max(2, triton.next_power_of_2(G)), D=D, BLOCK=block_size, N_SPLITS=n_splits,
        num_warps=num_warps, **pdl,
    )  # fmt: skip
    return launch_combine(part, m, w, out, combine)


@contextlib.contextmanager
def library_interpreted():
    """Triton's own library functions (tl.sum, tl.max, tl.cdiv, ...) are kernels too, built
    when triton.language was imported: for the block, each is its interpreted copy, as it
    would be had TRITON_INTERPRET=1 been set before that import."""
    with contextlib.suppress(ImportError):  # newer Tritons import it at a kernel's first
        import triton.experimental.gluon  # noqa: F401  call; it checks tl.standard's kernels
    modules = (tl, tl.standard)  # tl.argmax calls standard's max, tl.sort its own helpers
    compiled = [(module, name, f) for module in modules for name, f in vars(module).items()
                if isinstance(f, JITFunction)]  # fmt: skip
    try:
        for module, name, f in compiled:
            setattr(module, name, InterpretedFunction(f.fn))
        yield
    finally:
        for module, name, f in compiled:
            setattr(module, name, f)


def interpreted_paged_decode_attention(q, k_cache, v_cache, block_table, lens,
                                       n_splits: int = N_SPLITS) -> Tensor:  # fmt: skip
    """The Triton kernels run by Triton's interpreter, on CPU tensors (tests and notebook 08),
    whatever TRITON_INTERPRET said when this module was imported."""
    if triton is None:
        raise RuntimeError("Triton is not installed here (it installs on Linux): the "
                           "reference runs instead")  # fmt: skip
    kernels = (InterpretedFunction(split_kernel_body), InterpretedFunction(combine_kernel_body))
    if isinstance(split_kernel, InterpretedFunction):  # TRITON_INTERPRET=1 at import: already
        kernels = None
    with library_interpreted():
        return triton_paged_decode_attention(
            q, k_cache, v_cache, block_table, lens, kernels, n_splits=n_splits
        )


# --- the custom op ---------------------------------------------------------------------------


@torch.library.custom_op("tinyllm::paged_decode_attention", mutates_args=())
def paged_decode_attention(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor, lens: Tensor
) -> Tensor:
    """Decode attention over a paged cache (the module docstring); the reference here, the
    Triton kernels on CUDA. Both check their arguments first (validate_paged_args)."""
    validate_paged_args(q, k_cache, v_cache, block_table, lens, values=CHECK_VALUES)
    return reference_paged_decode_attention(q, k_cache, v_cache, block_table, lens)


if triton is not None:

    @paged_decode_attention.register_kernel("cuda")
    def _(q, k_cache, v_cache, block_table, lens):
        return triton_paged_decode_attention(q, k_cache, v_cache, block_table, lens)


@paged_decode_attention.register_fake
def _(q, k_cache, v_cache, block_table, lens):
    return torch.empty_like(q)


# --- one kernel a layer: RoPE, the K/V write and the attention (notebooks 08 and 11) --------


def fused_kernel_body(QKV, COS, SIN, K, V, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                      qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                      out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                      H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                      BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
                      DOT: tl.constexpr = False, CHUNK: tl.constexpr = 1,
                      STAGES: tl.constexpr = 1, PDL: tl.constexpr = False):  # fmt: skip
    """Program (b, g, s): the decode step's attention for K/V head g of row b, from the
    projections before RoPE (QKV: H query heads, H_kv key heads, H_kv value heads). It
    rotates its G queries and the row's new key (COS, SIN: RoPE's tables, read at the row's
    position), and the program whose split holds the new position writes the new key and
    value into their block, then attends over its split with them. PARTIALS: it writes its
    split's partials, to be combined (combine_kernel, or projections.combine_project_add);
    else, with one split, the output. CHUNK blocks a pass of its loop, their loads pipelined
    in STAGES stages. DOT: the two products on tensor cores (tl.dot, in TF32), the G queries
    padded to G_PAD = 16 rows; else as sums of products. PDL: as combine_kernel."""
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    n_old = tl.load(LENS + b * lens_row)  # the keys before: the new one takes position n_old
    n_keys = n_old + 1
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    d = tl.arange(0, D)
    pair = (d + D // 2) % D  # RoPE's partner of each dimension (rotate-half)
    angle = n_old * rope_row + d % (D // 2)  # RoPE's tables: D/2 angles a position
    cos = tl.load(COS + angle).to(tl.float32)
    sin = tl.load(SIN + angle).to(tl.float32)
    sin = tl.where(d < D // 2, -sin, sin)  # widened, as model.widen: -sin, then sin
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    row = QKV + b * qkv_row
    q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None],
                     other=0.0)  # fmt: skip
    q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
    if s == (n_old // BLOCK) // per_split:  # this split holds the new position: write it
        k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
        k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
        v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
        block = tl.load(TABLE + b * table_row + n_old // BLOCK)
        at = block * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
        tl.store(K + at, (k_new * cos + k_pair * sin).to(K.dtype.element_ty))
        tl.store(V + at, v_new)
        tl.debug_barrier()  # the program's loads below see its store
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    w = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    key = tl.arange(0, CHUNK * BLOCK)  # the keys of a pass: CHUNK blocks
    for i in tl.range(first, last, CHUNK, num_stages=STAGES):
        j = i + key // BLOCK  # each key's block, as an index into the row's table
        block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
        at = block[:, None] * k_block + g * k_head + (key % BLOCK)[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)  # (CHUNK·BLOCK, D)
        v = tl.load(V + at).to(tl.float32)
        if DOT:
            scores = tl.dot(q, tl.trans(k))
        else:
            scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        scores = tl.where(((j < last) & (i * BLOCK + key < n_keys))[None, :], scores,
                          float("-inf"))  # fmt: skip
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        if DOT:
            acc = acc * rescale[:, None] + tl.dot(p, v)
        else:
            acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    if not PARTIALS:
        out = OUT + b * out_row + heads[:, None] * out_head + d[None, :]
        tl.store(out, (acc / w[:, None]).to(OUT.dtype.element_ty), mask=real[:, None])
    else:
        out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
        tl.store(out, acc, mask=real[:, None])
        tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
        tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


if triton is not None:
    fused_kernel = triton.jit(fused_kernel_body)


def split_count(B: int, H_kv: int, device) -> int:
    """The splits of a row's keys, fixed at capture by the batch: about four programs for each
    of the GPU's multiprocessors (132 on an H200), B·H_kv a split, as a power of two from 1
    to STEP_SPLITS. The length cannot count: a graph replays at every length. A program's
    blocks are a chain of waits, one a block: the more splits, the shorter the chain at long
    lengths. On the H200, at batch 8, 16 splits beat 4 at 64 keys and at 1000
    (results/gpu_checks/2026-12-02_c58a9f7); at batch 1, 64 splits held the step nearly flat
    from 32 keys to 1023, up to a µs slower at the shortest (results/h200_splits.json).
    From 67 rows of 4 K/V heads up, on 132 multiprocessors, one split: one kernel, no combine."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if (
        torch.device(device).type == "cuda") else 132  # fmt: skip
    n = max(1, 4 * sms // (B * H_kv))
    return min(STEP_SPLITS, 1 << (n.bit_length() - 1))


def tensor_cores(width: int, n_splits: int) -> bool:
    """Whether the fused kernel runs its products on tensor cores: when a program's split of a
    full table (width blocks) holds more than one block. On the H200, in one run, the op with
    its combine took 4.7 µs at batch 8 and 1024 keys, against 8.1 as sums of products, and 54
    against 133 at batch 256; at 128 keys, up to 0.7 µs more at batch 4 and 8. At batch 1,
    64 splits leave a program one block: there the sums kept the step 0.9 µs faster in an
    earlier run (results/h200_dot.json, and its part "variants"). Chosen on the device instead,
    a row at a time, sums for a row whose splits hold one block: the op ran faster at short
    rows at batch 4 and 8, slower at 1, 2 and 256 rows, and the step at batch 8 grew more with
    the length (part "row_choice"). So the launch chooses, for every row."""
    return -(-width // n_splits) > 1


def split_passes(width: int, n_splits: int) -> tuple[int, int]:
    """The blocks a program reads a pass of its loop and the stages of its loads' pipeline,
    from the most blocks a split of a full table (width blocks) holds: one, (1, 1), the sums'
    walk; up to WHOLE_SPLIT, on tensor cores, the whole split in one pass (a power of two of
    blocks, the rest masked), so nothing to pipeline; more, DOT_CHUNK blocks a pass, their
    loads pipelined in DOT_STAGES stages. On the H200 at batch 8, 16 splits of 4 blocks, one
    pass a split made the decode step grow 1.05× from the first positions to the last, against
    1.13× in 2 blocks a pass, and cost about two µs at the first ones (results/h200_dot.json,
    part "whole_share")."""
    most = -(-width // n_splits)
    if most <= WHOLE_SPLIT:
        return 1 << (most - 1).bit_length(), 1
    return DOT_CHUNK, DOT_STAGES


def validate_step_args(qkv, cos, sin, k_cache, v_cache, block_table, lens, values=False) -> None:
    """rope_write_attend's door: validate_paged_args on the queries (lens + 1 keys, the new one
    counted, with values=True), and cos and sin (positions, head_dim / 2), the lengths below
    their positions with values=True."""
    if not isinstance(qkv, Tensor) or qkv.ndim != 3 or not isinstance(k_cache, Tensor):
        raise ValueError(f"qkv must be a (B, H + 2·H_kv, D) tensor, got {qkv!r:.60}")
    H = qkv.shape[1] - 2 * k_cache.shape[1] if k_cache.ndim == 4 else 0
    if H < 1:
        raise ValueError(f"qkv's {qkv.shape[1]} heads must hold H query heads and the cache's "
                         f"K/V heads twice")  # fmt: skip
    validate_paged_args(qkv[:, :H], k_cache, v_cache, block_table, lens + 1 if values else lens,
                        values)  # fmt: skip
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor) or t.ndim != 2 or t.shape != (cos.shape[0], qkv.shape[2] // 2):
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be RoPE's table, (positions, D / 2) with D = "
                             f"{qkv.shape[2]}, as cos; got {got}")  # fmt: skip
        if t.device != qkv.device or t.stride(-1) != 1:
            raise ValueError(f"{name} must be on {qkv.device} with unit stride along its angles")
    if values and bool((lens >= cos.shape[0]).any()):
        raise ValueError(f"lens holds {int(lens.max())}: RoPE's tables hold positions "
                         f"[0, {cos.shape[0]})")  # fmt: skip


def reference_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens) -> Tensor:
    """The same step in PyTorch: RoPE on the queries and the new keys at each row's position
    (the tables' rows lens[b], widened, then model.apply_rope's formula), the new K/V written
    at position lens[b] of each row, then attention over the first lens[b] + 1 keys."""
    H_kv, block_size = k_cache.shape[1], k_cache.shape[2]
    H = qkv.shape[1] - 2 * H_kv
    n = lens.long()
    cos, sin = torch.cat([cos[n], cos[n]], dim=-1), torch.cat([-sin[n], sin[n]], dim=-1)
    qk = qkv[:, : H + H_kv]
    x1, x2 = qk.chunk(2, dim=-1)
    qk = torch.addcmul(qk * cos[:, None], torch.cat([x2, x1], dim=-1), sin[:, None])
    blocks = block_table.long().gather(1, (n // block_size)[:, None])[:, 0]
    k_cache[blocks, :, n % block_size] = qk[:, H:]
    v_cache[blocks, :, n % block_size] = qkv[:, H + H_kv :]
    return reference_paged_decode_attention(qk[:, :H], k_cache, v_cache, block_table, n + 1)


def triton_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens, kernels=None,
                             n_splits=None, num_warps=NUM_WARPS, splits=False):  # fmt: skip
    """Launch the fused kernel (and combine_kernel when a row's keys are split), after the
    door. kernels: a (fused, combine) pair, default the compiled ones. splits=True: no
    combine; the splits (part, max, sum) are returned, for combine_project_add."""
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    validate_step_args(qkv, cos, sin, k_cache, v_cache, block_table, lens,
                       values=CHECK_VALUES or qkv.device.type == "cpu")  # fmt: skip
    fused, combine = kernels or (fused_kernel, combine_kernel)
    n_splits = split_count(B, H_kv, qkv.device) if n_splits is None else validate_splits(n_splits)
    G = H // H_kv
    dot = tensor_cores(block_table.shape[1], n_splits)
    chunk, stages = split_passes(block_table.shape[1], n_splits)
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    fused[(B, H_kv, n_splits)](
        qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0), out.stride(1),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        H=H, G=G, G_PAD=max(16 if dot else 2, triton.next_power_of_2(G)), D=D, BLOCK=block_size,
        N_SPLITS=n_splits, PARTIALS=splits or n_splits > 1, DOT=dot,
        CHUNK=chunk, STAGES=stages, num_warps=num_warps,
        **pdl_launch(qkv.device),
    )  # fmt: skip
    if splits:
        return part, m, w
    return launch_combine(part, m, w, out, combine) if n_splits > 1 else out


def interpreted_rope_write_attend(*args, n_splits: int = 2, splits: bool = False):
    """The fused kernel run by Triton's interpreter, on CPU tensors: the output, or with
    splits=True the splits (part, max, sum), as triton_rope_write_attend."""
    if triton is None:
        raise RuntimeError("Triton is not installed here (it installs on Linux): the "
                           "reference runs instead")  # fmt: skip
    kernels = (InterpretedFunction(fused_kernel_body), InterpretedFunction(combine_kernel_body))
    if isinstance(fused_kernel, InterpretedFunction):
        kernels = None
    with library_interpreted():
        return triton_rope_write_attend(*args, kernels=kernels, n_splits=n_splits, splits=splits)


@torch.library.custom_op("tinyllm::rope_write_attend", mutates_args=("k_cache", "v_cache"))
def rope_write_attend(qkv: Tensor, cos: Tensor, sin: Tensor, k_cache: Tensor, v_cache: Tensor,
                      block_table: Tensor, lens: Tensor) -> Tensor:  # fmt: skip
    """One decode step's attention for a layer, from its projections: qkv (B, H + 2·H_kv, D)
    before RoPE, cos and sin RoPE's tables (positions, D / 2), read at each row's position,
    lens (B,) the keys each row holds before the step. Writes the new K/V into the pools,
    returns (B, H, D). The reference here, the fused Triton kernel on CUDA."""
    validate_step_args(qkv, cos, sin, k_cache, v_cache, block_table, lens, values=CHECK_VALUES)
    return reference_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens)


if triton is not None:

    @rope_write_attend.register_kernel("cuda")
    def _(qkv, cos, sin, k_cache, v_cache, block_table, lens):
        return triton_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens)


@rope_write_attend.register_fake
def _(qkv, cos, sin, k_cache, v_cache, block_table, lens):
    H = qkv.shape[1] - 2 * k_cache.shape[1]
    return qkv.new_empty(qkv.shape[0], H, qkv.shape[2])


@torch.library.custom_op("tinyllm::rope_write_splits", mutates_args=("k_cache", "v_cache"))
def rope_write_splits(
    qkv: Tensor, cos: Tensor, sin: Tensor, k_cache: Tensor, v_cache: Tensor,
    block_table: Tensor, lens: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """rope_write_attend stopped before its combine: each row's splits of the attention, (part,
    max, sum) of shapes (B, H, S, D), (B, H, S) and (B, H, S) in float32, S = step_splits, for
    projections.combine_project_add to combine. The reference here: the whole row one split,
    already divided by its weight, (out, 0, 1); on CUDA, the fused kernel alone."""
    validate_step_args(qkv, cos, sin, k_cache, v_cache, block_table, lens, values=CHECK_VALUES)
    out = reference_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens)
    out = out.float()[:, :, None]
    return out, out.new_zeros(out.shape[:3]), out.new_ones(out.shape[:3])


def step_splits(B: int, H_kv: int, device) -> int:
    """The splits rope_write_splits returns a row: split_count on CUDA, one elsewhere. Part of
    its output's shape, so torch.compile reads it when it compiles a step. Changed later in
    the same process, a compiled step kept the shape it saw, even after torch._dynamo.reset():
    Inductor's cached code asserted it (results/gpu_checks/2026-12-03_292c31c, a probe that
    changed split_count). Changed in a new process, the same: Inductor reused the earlier
    process's code from its cache on disk (results/gpu_checks/2026-12-05_c49bcd9, probe72s16)."""
    return split_count(B, H_kv, device) if torch.device(device).type == "cuda" else 1


if triton is not None:

    @rope_write_splits.register_kernel("cuda")
    def _(qkv, cos, sin, k_cache, v_cache, block_table, lens):
        return triton_rope_write_attend(qkv, cos, sin, k_cache, v_cache, block_table, lens,
                                        splits=True)  # fmt: skip


@rope_write_splits.register_fake
def _(qkv, cos, sin, k_cache, v_cache, block_table, lens):
    B, H_kv, D = qkv.shape[0], k_cache.shape[1], qkv.shape[2]
    H, S = qkv.shape[1] - 2 * H_kv, step_splits(B, H_kv, qkv.device)
    part = qkv.new_empty(B, H, S, D, dtype=torch.float32)
    return part, part.new_empty(B, H, S), part.new_empty(B, H, S)


# --- sampling: one kernel a step (notebook 11) ---------------------------------------------


def sample_kernel_body(LOGITS, TEMPERATURE, TOP_K, SEED, POSITION, IDS, logits_row, t_row,
                       k_row, seed_row, position_row, vocab, V_PAD: tl.constexpr,
                       PDL: tl.constexpr = False):  # fmt: skip
    """Program b: row b's next id, as generation.reference_sample draws it. Its vocab logits
    sit in one tile of V_PAD, the ids past vocab at -inf. A greedy row takes the argmax. A
    drawn row: the top-k threshold (the k-th of the logits sorted; with every id kept, the
    least logit, no sort), the noise (splitmix64 of seed, position and id, three rounds),
    Gumbel-max over the ids kept. The division rounded to nearest, as torch's; the log the
    accurate one, not the fast approximation. PDL: as combine_kernel."""
    b = tl.program_id(0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    v = tl.arange(0, V_PAD)
    logits = tl.load(LOGITS + b * logits_row + v, mask=v < vocab, other=float("-inf"))
    logits = logits.to(tl.float32)
    temperature = tl.load(TEMPERATURE + b * t_row)
    id = tl.argmax(logits, axis=0, tie_break_left=True)  # greedy
    if temperature > 0:
        k = tl.load(TOP_K + b * k_row)
        kth = tl.min(tl.where(v < vocab, logits, float("inf")), axis=0)  # every id kept
        if (k > 0) & (k < vocab):
            top = tl.sort(logits, descending=True)
            kth = tl.max(tl.where(v == k - 1, top, float("-inf")), axis=0)
        # the noise: z = splitmix64(splitmix64(splitmix64(seed) ^ position) ^ id), in uint64
        z = tl.load(SEED + b * seed_row).to(tl.uint64, bitcast=True)
        z = z + tl.zeros([V_PAD], tl.uint64)
        for r in tl.static_range(3):
            z = z + 0x9E3779B97F4A7C15
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
            z = (z ^ (z >> 27)) * 0x94D049BB133111EB
            z = z ^ (z >> 31)
            if r == 0:
                position = tl.load(POSITION + b * position_row).to(tl.int64)
                z = z ^ position.to(tl.uint64, bitcast=True)
            if r == 1:
                z = z ^ v.to(tl.uint64)
        u = ((z >> 41).to(tl.float32) + 0.5) * 1.1920928955078125e-07  # 2**-23
        gumbel = -tl.log(-tl.log(u))
        t = temperature.to(tl.float32)
        scores = tl.where(logits < kth, float("-inf"), tl.math.div_rn(logits, t) + gumbel)
        id = tl.argmax(scores, axis=0, tie_break_left=True)
    tl.store(IDS + b, id.to(tl.int64))


if triton is not None:
    sample_kernel = triton.jit(sample_kernel_body)


def triton_sample(logits, temperature, top_k, seed, position, kernel=None) -> Tensor:
    """Launch the sampler: one program a row (kernel: default the compiled one). Trusted, as
    generation.sample is: its arguments came through a door (validate_sampling)."""
    B, V = logits.shape
    logits = logits if logits.stride(1) == 1 else logits.contiguous()  # the kernel reads a row
    ids = torch.empty(B, dtype=torch.long, device=logits.device)
    (kernel or sample_kernel)[(B,)](
        logits, temperature, top_k, seed, position, ids, logits.stride(0),
        temperature.stride(0), top_k.stride(0), seed.stride(0), position.stride(0), V,
        V_PAD=triton.next_power_of_2(V), num_warps=4, **pdl_launch(logits.device),
    )  # fmt: skip
    return ids


def interpreted_sample(logits, temperature, top_k, seed, position) -> Tensor:
    """The sampler run by Triton's interpreter, on CPU tensors (tests)."""
    if triton is None:
        raise RuntimeError("Triton is not installed here (it installs on Linux): the "
                           "reference runs instead")  # fmt: skip
    kernel = InterpretedFunction(sample_kernel_body)
    if isinstance(sample_kernel, InterpretedFunction):
        kernel = None
    with library_interpreted():
        return triton_sample(logits, temperature, top_k, seed, position, kernel)
