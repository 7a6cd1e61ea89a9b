"""Issue 27, stop 47: the package's fused kernel with a short-row path. A row whose keys fit
SHORT blocks is attended by its share 0 alone, in one pass of SHORT blocks, which writes the
output itself; the combine program of such a row does nothing. Longer rows: the package's path,
unchanged. SHORT_DOT: the short pass on tensor cores (G padded to 16), else sums of products.
NOWAIT: the combine reads the length before its PDL wait and skips without waiting (measured
only, to know what the wait costs)."""
import torch
import triton
import triton.language as tl
from tinyllm import kernels as K


@triton.jit
def fused_short(QKV, COS, SIN, Kc, Vc, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
                DOT: tl.constexpr, CHUNK: tl.constexpr, STAGES: tl.constexpr,
                SHORT: tl.constexpr, SHORT_DOT: tl.constexpr, S_PAD: tl.constexpr,
                PDL: tl.constexpr = False):
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    n_old = tl.load(LENS + b * lens_row)
    n_keys = n_old + 1
    n_blocks = tl.cdiv(n_keys, BLOCK)
    d = tl.arange(0, D)
    pair = (d + D // 2) % D
    angle = n_old * rope_row + d % (D // 2)
    cos = tl.load(COS + angle).to(tl.float32)
    sin = tl.load(SIN + angle).to(tl.float32)
    sin = tl.where(d < D // 2, -sin, sin)
    row = QKV + b * qkv_row
    if n_blocks <= SHORT:
        if s == 0:
            heads = g * G + tl.arange(0, S_PAD)
            real = tl.arange(0, S_PAD) < G
            q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
            q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None], other=0.0)
            q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
            k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
            k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
            v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
            block = tl.load(TABLE + b * table_row + n_old // BLOCK)
            at = block * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
            tl.store(Kc + at, (k_new * cos + k_pair * sin).to(Kc.dtype.element_ty))
            tl.store(Vc + at, v_new)
            tl.debug_barrier()
            key = tl.arange(0, SHORT * BLOCK)
            j = key // BLOCK
            blk = tl.load(TABLE + b * table_row + j, mask=j < n_blocks, other=0)
            at2 = blk[:, None] * k_block + g * k_head + (key % BLOCK)[:, None] * k_pos + d[None, :]
            k = tl.load(Kc + at2).to(tl.float32)
            v = tl.load(Vc + at2).to(tl.float32)
            if SHORT_DOT:
                scores = tl.dot(q, tl.trans(k))
            else:
                scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
            scores = tl.where((key < n_keys)[None, :], scores, float("-inf"))
            m = tl.max(scores, axis=1)
            p = tl.exp(scores - m[:, None])
            w = tl.sum(p, axis=1)
            if SHORT_DOT:
                acc = tl.dot(p, v)
            else:
                acc = tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            out = OUT + b * out_row + heads[:, None] * out_head + d[None, :]
            tl.store(out, (acc / w[:, None]).to(OUT.dtype.element_ty), mask=real[:, None])
    else:
        per_split = tl.cdiv(n_blocks, N_SPLITS)
        first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
        heads = g * G + tl.arange(0, G_PAD)
        real = tl.arange(0, G_PAD) < G
        q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
        q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None], other=0.0)
        q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
        if s == (n_old // BLOCK) // per_split:
            k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
            k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
            v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
            block = tl.load(TABLE + b * table_row + n_old // BLOCK)
            at = block * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
            tl.store(Kc + at, (k_new * cos + k_pair * sin).to(Kc.dtype.element_ty))
            tl.store(Vc + at, v_new)
            tl.debug_barrier()
        m = tl.full([G_PAD], float("-inf"), tl.float32)
        w = tl.zeros([G_PAD], tl.float32)
        acc = tl.zeros([G_PAD, D], tl.float32)
        key = tl.arange(0, CHUNK * BLOCK)
        for i in tl.range(first, last, CHUNK, num_stages=STAGES):
            j = i + key // BLOCK
            block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
            at = block[:, None] * k_block + g * k_head + (key % BLOCK)[:, None] * k_pos + d[None, :]
            k = tl.load(Kc + at).to(tl.float32)
            v = tl.load(Vc + at).to(tl.float32)
            if DOT:
                scores = tl.dot(q, tl.trans(k))
            else:
                scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
            scores = tl.where(((j < last) & (i * BLOCK + key < n_keys))[None, :], scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, axis=1))
            rescale = tl.exp(m - m_new)
            p = tl.exp(scores - m_new[:, None])
            w = w * rescale + tl.sum(p, axis=1)
            if DOT:
                acc = acc * rescale[:, None] + tl.dot(p, v)
            else:
                acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
            m = m_new
        out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
        tl.store(out, acc, mask=real[:, None])
        tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
        tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


@triton.jit
def combine_short(PART, MAX, SUM, OUT, LENS, part_row, part_head, part_split, max_row,
                  max_head, out_row, out_head, lens_row, D: tl.constexpr,
                  N_SPLITS: tl.constexpr, BLOCK: tl.constexpr, SHORT: tl.constexpr,
                  NOWAIT: tl.constexpr, PDL: tl.constexpr = False):
    b, h = tl.program_id(0), tl.program_id(1)
    if NOWAIT:
        n_blocks = tl.cdiv(tl.load(LENS + b * lens_row) + 1, BLOCK)
        if PDL:
            if n_blocks > SHORT:
                tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
    else:
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        n_blocks = tl.cdiv(tl.load(LENS + b * lens_row) + 1, BLOCK)
    if n_blocks > SHORT:
        s, d = tl.arange(0, N_SPLITS), tl.arange(0, D)
        m = tl.load(MAX + b * max_row + h * max_head + s)
        w = tl.load(SUM + b * max_row + h * max_head + s)
        scale = tl.exp(m - tl.max(m, axis=0))
        part = tl.load(PART + b * part_row + h * part_head + s[:, None] * part_split + d[None, :])
        out = tl.sum(scale[:, None] * part, axis=0) / tl.sum(scale * w, axis=0)
        tl.store(OUT + b * out_row + h * out_head + d, out.to(OUT.dtype.element_ty))


def op(qkv, cos, sin, k_cache, v_cache, block_table, lens, short=8, short_dot=False,
       nowait=False, num_warps=K.NUM_WARPS, combine=True):
    """The variant op: the fused kernel with its short path, then the skipping combine."""
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    n_splits = K.split_count(B, H_kv, qkv.device)
    G = H // H_kv
    dot = K.tensor_cores(block_table.shape[1], n_splits)
    chunk, stages = K.share_passes(block_table.shape[1], n_splits)
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    pdl = K.pdl_launch(qkv.device)
    fused_short[(B, H_kv, n_splits)](
        qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0), out.stride(1),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        H=H, G=G, G_PAD=max(16 if dot else 2, triton.next_power_of_2(G)), D=D, BLOCK=block_size,
        N_SPLITS=n_splits, PARTIALS=True, DOT=dot, CHUNK=chunk, STAGES=stages,
        SHORT=short, SHORT_DOT=short_dot, S_PAD=max(16 if short_dot else 2, triton.next_power_of_2(G)),
        num_warps=num_warps, **pdl)
    if not combine:
        return out
    combine_short[(B, H)](
        part, m, w, out, lens, part.stride(0), part.stride(1), part.stride(2), m.stride(0),
        m.stride(1), out.stride(0), out.stride(1), lens.stride(0), D=D, N_SPLITS=n_splits,
        BLOCK=block_size, SHORT=short, NOWAIT=nowait, num_warps=1, **pdl)
    return out
