"""Prototype variants of the paged decode-attention kernel:
- "one": split-K in one kernel; the last program of each (row, K/V head) to finish (an
  atomic counter) combines the partials and resets the counter;
- PDL: launched with programmatic dependent launch (gdc_wait before the first read of
  another kernel's output, gdc_launch_dependents once the inputs are read)."""

import torch
import triton
import triton.language as tl

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # interpreter or old Triton
    gdc_wait = gdc_launch_dependents = None


@triton.jit
def one_kernel(Q, K, V, TABLE, LENS, PART, MAX, SUM, COUNT, OUT, scale,
               q_row, q_head, k_block, k_head, k_pos, table_row,
               part_row, part_head, part_split, max_row, max_head, out_row, out_head,
               G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
               BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PDL: tl.constexpr):  # fmt: skip
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if PDL:
        gdc_wait()
    n_keys = tl.load(LENS + b)
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    d, t = tl.arange(0, D), tl.arange(0, BLOCK)
    q = tl.load(Q + b * q_row + heads[:, None] * q_head + d[None, :], mask=real[:, None], other=0.0)
    q = q.to(tl.float32) * scale
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    w = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for i in range(first, last):
        block = tl.load(TABLE + b * table_row + i)
        at = block * k_block + g * k_head + t[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)
        v = tl.load(V + at).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        scores = tl.where((i * BLOCK + t)[None, :] < n_keys, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    if PDL:
        gdc_launch_dependents()
    tl.store(PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :], acc,
             mask=real[:, None])  # fmt: skip
    tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
    tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)
    tl.debug_barrier()  # every thread's stores before the count
    done = tl.atomic_add(COUNT + b * (tl.num_programs(1)) + g, 1, sem="acq_rel")
    if done == N_SPLITS - 1:  # the last of this (row, K/V head): combine the partials
        sp = tl.arange(0, N_SPLITS)
        ms = tl.load(MAX + b * max_row + heads[:, None] * max_head + sp[None, :],
                     mask=real[:, None], other=float("-inf"), cache_modifier=".cg")  # fmt: skip
        ws = tl.load(SUM + b * max_row + heads[:, None] * max_head + sp[None, :],
                     mask=real[:, None], other=0.0, cache_modifier=".cg")  # fmt: skip
        top = tl.max(ms, axis=1)
        top = tl.where(real, top, 0.0)
        sc = tl.exp(ms - top[:, None])  # (G_PAD, N_SPLITS)
        parts = tl.load(PART + b * part_row + heads[:, None, None] * part_head
                        + sp[None, :, None] * part_split + d[None, None, :],
                        mask=real[:, None, None], other=0.0, cache_modifier=".cg")  # fmt: skip
        num = tl.sum(sc[:, :, None] * parts, axis=1)  # (G_PAD, D)
        den = tl.sum(sc * ws, axis=1)
        den = tl.where(real, den, 1.0)
        out = num / den[:, None]
        tl.store(OUT + b * out_row + heads[:, None] * out_head + d[None, :],
                 out.to(OUT.dtype.element_ty), mask=real[:, None])  # fmt: skip
        tl.atomic_xchg(COUNT + b * (tl.num_programs(1)) + g, 0)


@triton.jit
def split_pdl(Q, K, V, TABLE, LENS, PART, MAX, SUM, scale,
              q_row, q_head, k_block, k_head, k_pos, table_row,
              part_row, part_head, part_split, max_row, max_head,
              G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
              BLOCK: tl.constexpr, N_SPLITS: tl.constexpr):  # fmt: skip
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    gdc_wait()
    n_keys = tl.load(LENS + b)
    n_blocks = tl.cdiv(n_keys, BLOCK)
    per_split = tl.cdiv(n_blocks, N_SPLITS)
    first, last = s * per_split, tl.minimum((s + 1) * per_split, n_blocks)
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    d, t = tl.arange(0, D), tl.arange(0, BLOCK)
    q = tl.load(Q + b * q_row + heads[:, None] * q_head + d[None, :], mask=real[:, None], other=0.0)
    q = q.to(tl.float32) * scale
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    w = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for i in range(first, last):
        block = tl.load(TABLE + b * table_row + i)
        at = block * k_block + g * k_head + t[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)
        v = tl.load(V + at).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        scores = tl.where((i * BLOCK + t)[None, :] < n_keys, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * v[None, :, :], axis=1)
        m = m_new
    gdc_launch_dependents()
    out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
    tl.store(out, acc, mask=real[:, None])
    tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
    tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


@triton.jit
def combine_pdl(PART, MAX, SUM, OUT, part_row, part_head, part_split, max_row,
                max_head, out_row, out_head, D: tl.constexpr, N_SPLITS: tl.constexpr):  # fmt: skip
    b, h = tl.program_id(0), tl.program_id(1)
    gdc_wait()
    s, d = tl.arange(0, N_SPLITS), tl.arange(0, D)
    m = tl.load(MAX + b * max_row + h * max_head + s)
    w = tl.load(SUM + b * max_row + h * max_head + s)
    scale = tl.exp(m - tl.max(m, axis=0))
    part = tl.load(PART + b * part_row + h * part_head + s[:, None] * part_split + d[None, :])
    gdc_launch_dependents()
    out = tl.sum(scale[:, None] * part, axis=0) / tl.sum(scale * w, axis=0)
    tl.store(OUT + b * out_row + h * out_head + d, out.to(OUT.dtype.element_ty))


_COUNTS = {}


def counts_for(device, n):
    key = (str(device), n)
    if key not in _COUNTS:
        _COUNTS[key] = torch.zeros(n, dtype=torch.int32, device=device)
    return _COUNTS[key]


def one(q, k_cache, v_cache, block_table, lens, n_splits=16, num_warps=2, pdl=False):
    B, H, D = q.shape
    _, H_kv, block_size, _ = k_cache.shape
    G = H // H_kv
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=q.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=q.device)
    w = torch.empty_like(m)
    out = torch.empty_like(q)
    count = counts_for(q.device, B * H_kv)
    extra = {"launch_pdl": True} if pdl else {}
    one_kernel[(B, H_kv, n_splits)](
        q, k_cache, v_cache, block_table, lens, part, m, w, count, out, D**-0.5,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_table.stride(0), part.stride(0), part.stride(1), part.stride(2),
        m.stride(0), m.stride(1), out.stride(0), out.stride(1),
        G=G, G_PAD=max(2, triton.next_power_of_2(G)), D=D, BLOCK=block_size, N_SPLITS=n_splits,
        PDL=pdl, num_warps=num_warps, **extra,
    )  # fmt: skip
    return out


def two_pdl(q, k_cache, v_cache, block_table, lens, n_splits=16, num_warps=2):
    B, H, D = q.shape
    _, H_kv, block_size, _ = k_cache.shape
    G = H // H_kv
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=q.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=q.device)
    w = torch.empty_like(m)
    out = torch.empty_like(q)
    split_pdl[(B, H_kv, n_splits)](
        q, k_cache, v_cache, block_table, lens, part, m, w, D**-0.5,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_table.stride(0), part.stride(0), part.stride(1), part.stride(2),
        m.stride(0), m.stride(1),
        G=G, G_PAD=max(2, triton.next_power_of_2(G)), D=D, BLOCK=block_size, N_SPLITS=n_splits,
        num_warps=num_warps, launch_pdl=True,
    )  # fmt: skip
    combine_pdl[(B, H)](
        part, m, w, out, part.stride(0), part.stride(1), part.stride(2), m.stride(0),
        m.stride(1), out.stride(0), out.stride(1), D=D, N_SPLITS=n_splits, num_warps=1,
        launch_pdl=True,
    )  # fmt: skip
    return out
