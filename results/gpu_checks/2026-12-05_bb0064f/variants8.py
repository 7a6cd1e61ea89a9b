"""Issue 27, prepared with no GPU (stop 51): the fused kernel reading before PDL's wait
(variants5's form, gpu_checks/2026-12-04_ab41dcb) with PDL's trigger first (variants6's move,
gpu_checks/2026-12-04_ed06d23), in the attention's kernel only. The two were timed apart;
this times them together.

Why the two may meet here. A kernel that reads before its wait leans on one rule: when it
starts, every kernel but the one just before it has finished. That holds while every kernel
triggers after its own wait. Here only the attention triggers first. The kernel after it (the
combine, or at one row the output projection) reads nothing before its wait that the
attention writes, and triggers after its wait, as the package's do. So the next attention
starts only after this one has finished: its early reads of the pools see this one's writes.
The kernel before the attention (the QKV projection, or in the op alone the combine) still
triggers after its wait. Checked below on a CPU under the interpreter (no PDL there), and on
the GPU by the probe: every call of a graph reads the key the call before wrote.

EARLY=False is variants5's kernel as it ran. A share must be read in one pass (the launch
falls back to the package's kernel where it is not: from 9 rows up, at 64 blocks a row)."""
import triton
import triton.language as tl

from tinyllm import kernels as K

PACKAGE = K.triton_rope_write_attend  # the package's launch, kept: a probe may swap the name

@triton.jit
def fused_pre(QKV, COS, SIN, Kc, Vc, TABLE, LENS, OUT, PART, MAX, SUM, scale,
              qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
              out_row, out_head, part_row, part_head, part_split, max_row, max_head,
              H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
              BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
              DOT: tl.constexpr, CHUNK: tl.constexpr, STAGES: tl.constexpr = 1,
              PDL: tl.constexpr = False, EARLY: tl.constexpr = False):  # fmt: skip
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if PDL and EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    n_old = tl.load(LENS + b * lens_row)
    n_keys = n_old + 1
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    d = tl.arange(0, D)
    key = tl.arange(0, CHUNK * BLOCK)
    j = first + key // BLOCK
    live = j < last
    block = tl.load(TABLE + b * table_row + j, mask=live, other=0)
    at = block[:, None] * k_block + g * k_head + (key % BLOCK)[:, None] * k_pos + d[None, :]
    k = tl.load(Kc + at, mask=live[:, None], other=0.0)
    v = tl.load(Vc + at, mask=live[:, None], other=0.0)
    pair = (d + D // 2) % D
    angle = n_old * rope_row + d % (D // 2)
    cos = tl.load(COS + angle).to(tl.float32)
    sin = tl.load(SIN + angle).to(tl.float32)
    sin = tl.where(d < D // 2, -sin, sin)
    if PDL:
        tl.extra.cuda.gdc_wait()
        if not EARLY:
            tl.extra.cuda.gdc_launch_dependents()
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    row = QKV + b * qkv_row
    q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None],
                     other=0.0)  # fmt: skip
    q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
    k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
    k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
    v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
    k_new = (k_new * cos + k_pair * sin).to(Kc.dtype.element_ty)
    if s == (n_old // BLOCK) // per_split:
        nb = tl.load(TABLE + b * table_row + n_old // BLOCK)
        at_new = nb * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
        tl.store(Kc + at_new, k_new)
        tl.store(Vc + at_new, v_new)
    here = (first * BLOCK + key == n_old)[:, None]
    k = tl.where(here, k_new[None, :], k).to(tl.float32)
    v = tl.where(here, v_new[None, :], v).to(tl.float32)
    if DOT:
        scores = tl.dot(q, tl.trans(k))
    else:
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
    scores = tl.where((live & (first * BLOCK + key < n_keys))[None, :], scores, float("-inf"))
    m = tl.max(scores, axis=1)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    p = tl.exp(scores - m_safe[:, None])
    w = tl.sum(p, axis=1)
    if DOT:
        acc = tl.dot(p, v)
    else:
        acc = tl.sum(p[:, :, None] * v[None, :, :], axis=1)
    if not PARTIALS:
        out = OUT + b * out_row + heads[:, None] * out_head + d[None, :]
        tl.store(out, (acc / w[:, None]).to(OUT.dtype.element_ty), mask=real[:, None])
    else:
        out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
        tl.store(out, acc, mask=real[:, None])
        tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
        tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


def one_pass(block_table, n_splits) -> bool:
    """Whether the package reads every share in one pass here (fused_pre's one form)."""
    chunk, stages = K.share_passes(block_table.shape[1], n_splits)
    return stages == 1 and chunk >= -(-block_table.shape[1] // n_splits)


class Early:
    """fused_pre as a kernel the package's launch can take (kernels=(fused, combine)): the
    package's own launch, door and combine, with EARLY fixed."""

    def __init__(self, early: bool, kernel=fused_pre):
        self.early, self.kernel = early, kernel

    def __getitem__(self, grid):
        launch = self.kernel[grid]
        return lambda *a, **k: launch(*a, **k, EARLY=self.early)


def attend(qkv, cos, sin, k_cache, v_cache, block_table, lens, early=True, shares=False,
           kernel=fused_pre, combine=None):  # fmt: skip
    """The op with fused_pre where a share is read in one pass, else the package's kernel:
    triton_rope_write_attend's signature, for the probe's swap (kernels.triton_rope_write_attend
    = attend, as stop 50's probe72 swapped its variant)."""
    n_splits = K.split_count(qkv.shape[0], k_cache.shape[1], qkv.device)
    if not one_pass(block_table, n_splits):
        return PACKAGE(qkv, cos, sin, k_cache, v_cache, block_table, lens, shares=shares)
    pair = (Early(early, kernel), combine or K.combine_kernel)
    return PACKAGE(qkv, cos, sin, k_cache, v_cache, block_table, lens, kernels=pair,
                   n_splits=n_splits, shares=shares)


def interpreted(*args, early=True, shares=False, n_splits=None):
    """attend under Triton's interpreter, on CPU tensors (no PDL there: EARLY changes nothing
    the interpreter runs, and the CPU checks the arithmetic only)."""
    from triton.runtime.interpreter import InterpretedFunction

    with K.library_interpreted():
        pair = (Early(early, InterpretedFunction(fused_pre.fn)),
                InterpretedFunction(K.combine_kernel_body))  # fmt: skip
        n = n_splits or K.split_count(args[0].shape[0], args[3].shape[1], "cpu")
        assert one_pass(args[5], n), "fused_pre reads a share in one pass only"
        return PACKAGE(*args, kernels=pair, n_splits=n, shares=shares)
