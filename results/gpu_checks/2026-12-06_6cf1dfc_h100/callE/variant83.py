"""A variant of the paged step's fused attention (kernels.fused_kernel_body): program (b, s)
attends for every K/V head of row b over split s, where the package's program (b, g, s)
takes one K/V head. The grid is (B, 1, S): H_kv times fewer programs. A block's keys of all
H_kv heads are read as one list of H_kv·BLOCK keys; each query head's scores against another
head's keys are masked to -inf, so their weights are 0 (sums of products or tl.dot, the
queries padded to H_PAD rows). The split holding the new position writes every head's new key
and value. Its splits (part, max, sum) have the package's shapes, so the package's combine, or
the output projection's fold, combines them.

Not in the package: a probe (probe83.py) times it against the package's kernel."""

import torch
import triton
import triton.language as tl

from tinyllm import kernels as K


def heads_kernel_body(QKV, COS, SIN, KC, VC, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                      qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                      out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                      H: tl.constexpr, H_KV: tl.constexpr, G: tl.constexpr,
                      H_PAD: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
                      N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr, DOT: tl.constexpr = False,
                      STAGES: tl.constexpr = 1, CHUNK: tl.constexpr = 1, LOW: tl.constexpr = False,
                      PDL: tl.constexpr = False):  # fmt: skip
    b, s = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    n_old = tl.load(LENS + b * lens_row)
    n_keys = n_old + 1
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    d = tl.arange(0, D)
    pair = (d + D // 2) % D
    angle = n_old * rope_row + d % (D // 2)
    cos = tl.load(COS + angle).to(tl.float32)
    sin = tl.load(SIN + angle).to(tl.float32)
    sin = tl.where(d < D // 2, -sin, sin)
    qh = tl.arange(0, H_PAD)  # the query heads, padded
    real = qh < H
    row = QKV + b * qkv_row
    q = tl.load(row + qh[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + qh[:, None] * qkv_head + pair[None, :], mask=real[:, None],
                     other=0.0)  # fmt: skip
    q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
    if s == (n_old // BLOCK) // per_split:  # this split holds the new position: every head's
        hk = tl.arange(0, H_KV)
        k_new = tl.load(row + (H + hk)[:, None] * qkv_head + d[None, :]).to(tl.float32)
        k_pair = tl.load(row + (H + hk)[:, None] * qkv_head + pair[None, :]).to(tl.float32)
        v_new = tl.load(row + (H + H_KV + hk)[:, None] * qkv_head + d[None, :])
        block = tl.load(TABLE + b * table_row + n_old // BLOCK)
        at = block * k_block + hk[:, None] * k_head + (n_old % BLOCK) * k_pos + d[None, :]
        tl.store(KC + at, (k_new * cos[None, :] + k_pair * sin[None, :]).to(KC.dtype.element_ty))
        tl.store(VC + at, v_new)
        tl.debug_barrier()
    flat = tl.arange(0, H_KV * CHUNK * BLOCK)  # CHUNK blocks' keys of every head, flattened
    kh = flat // (CHUNK * BLOCK)  # each key's K/V head
    c = (flat // BLOCK) % CHUNK  # its block within the pass
    kk = flat % BLOCK  # its position in the block
    mine = (qh[:, None] // G) == kh[None, :]  # a query head meets its own K/V head's keys
    m = tl.full([H_PAD], float("-inf"), tl.float32)
    w = tl.zeros([H_PAD], tl.float32)
    acc = tl.zeros([H_PAD, D], tl.float32)
    for i in tl.range(first, last, CHUNK, num_stages=STAGES):
        j = i + c
        block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
        at = block[:, None] * k_block + kh[:, None] * k_head + kk[:, None] * k_pos + d[None, :]
        if LOW:  # the products in the pools' dtype, accumulated in float32
            k = tl.load(KC + at)
            v = tl.load(VC + at)
            scores = tl.dot(q.to(k.dtype), tl.trans(k))
        else:
            k = tl.load(KC + at).to(tl.float32)  # (H_KV·CHUNK·BLOCK, D)
            v = tl.load(VC + at).to(tl.float32)
            if DOT:
                scores = tl.dot(q, tl.trans(k))
            else:
                scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        valid = mine & ((j < last) & (j * BLOCK + kk < n_keys))[None, :]
        scores = tl.where(valid, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        m_new = tl.where(real, m_new, 0.0)  # padded query rows: no -inf - -inf
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        if LOW:
            acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
        elif DOT:
            acc = acc * rescale[:, None] + tl.dot(p, v)
        else:
            acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    if not PARTIALS:
        out = OUT + b * out_row + qh[:, None] * out_head + d[None, :]
        tl.store(out, (acc / w[:, None]).to(OUT.dtype.element_ty), mask=real[:, None])
    else:
        out = PART + b * part_row + qh[:, None] * part_head + s * part_split + d[None, :]
        tl.store(out, acc, mask=real[:, None])
        tl.store(MAX + b * max_row + qh * max_head + s, m, mask=real)
        tl.store(SUM + b * max_row + qh * max_head + s, w, mask=real)


heads_kernel = triton.jit(heads_kernel_body)


def launch(qkv, cos, sin, k_cache, v_cache, block_table, lens, n_splits=None, num_warps=4,
           dot=None, stages=1, chunk=1, low=False, splits=False, kernel=None,
           combine=None):  # fmt: skip
    """As kernels.triton_rope_write_attend, with the variant's grid (B, n_splits)."""
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    n_splits = K.split_count(B, H_kv, qkv.device) if n_splits is None else n_splits
    dot = K.tensor_cores(block_table.shape[1], n_splits) if dot is None else dot
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    (kernel or heads_kernel)[(B, n_splits)](
        qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0), out.stride(1),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        H=H, H_KV=H_kv, G=H // H_kv,
        H_PAD=max(16 if (dot or low) else 1, triton.next_power_of_2(H)), CHUNK=chunk, LOW=low,
        D=D, BLOCK=block_size, N_SPLITS=n_splits, PARTIALS=splits or n_splits > 1, DOT=dot,
        STAGES=stages, num_warps=num_warps, **K.pdl_launch(qkv.device),
    )  # fmt: skip
    if splits:
        return part, m, w
    return K.launch_combine(part, m, w, out, combine) if n_splits > 1 else out
