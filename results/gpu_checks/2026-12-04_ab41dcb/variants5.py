"""Issue 27, stop 47, call B: the package's fused kernel where a share is read in one pass,
with the row's length, its blocks' ids and their keys and values loaded before the PDL wait
(they were written long before the kernel before: the pool by this layer's kernel a step ago,
the table and lengths before the step), and only the projections (qkv) after it. The new key
and value are put into the pass in registers (rounded as the pool holds them) as well as
written to the pool. Arithmetic in the package's order: outputs equal to the package's."""
import torch
import triton
import triton.language as tl
from tinyllm import kernels as K


@triton.jit
def fused_pre(QKV, COS, SIN, Kc, Vc, TABLE, LENS, OUT, PART, MAX, SUM, scale,
              qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
              out_row, out_head, part_row, part_head, part_split, max_row, max_head,
              H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
              BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
              DOT: tl.constexpr, CHUNK: tl.constexpr, PDL: tl.constexpr = False):
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
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
        tl.extra.cuda.gdc_launch_dependents()
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    row = QKV + b * qkv_row
    q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None], other=0.0)
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


def op(qkv, cos, sin, k_cache, v_cache, block_table, lens, combine=True):
    """The variant op: fused_pre where the package reads a share in one pass, then the
    package's combine kernel."""
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    n_splits = K.split_count(B, H_kv, qkv.device)
    G = H // H_kv
    dot = K.tensor_cores(block_table.shape[1], n_splits)
    chunk, stages = K.share_passes(block_table.shape[1], n_splits)
    assert stages == 1 and chunk >= -(-block_table.shape[1] // n_splits), "one pass only"
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    fused_pre[(B, H_kv, n_splits)](
        qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0), out.stride(1),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        H=H, G=G, G_PAD=max(16 if dot else 2, triton.next_power_of_2(G)), D=D, BLOCK=block_size,
        N_SPLITS=n_splits, PARTIALS=n_splits > 1, DOT=dot, CHUNK=chunk,
        num_warps=K.NUM_WARPS, **K.pdl_launch(qkv.device))
    if not combine:
        return (part, m, w) if n_splits > 1 else out
    return K.launch_combine(part, m, w, out) if n_splits > 1 else out
