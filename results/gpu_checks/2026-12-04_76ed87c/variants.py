"""Issue 27, stop 44: fused attention kernels on tensor cores (tl.dot), for the probe."""
import triton
import triton.language as tl


def dot_kernel_body(QKV, COS, SIN, K, V, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                    qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                    out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                    H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                    BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
                    PDL: tl.constexpr = False, CHUNK: tl.constexpr = 1, M: tl.constexpr = 16,
                    STAGES: tl.constexpr = 1, WIDTH: tl.constexpr = 64):
    """As kernels.fused_kernel_body, the scores and the weighted sum as tl.dot on tensor
    cores: the G queries padded to M rows, CHUNK blocks of keys a step."""
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
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
    heads = g * G + tl.arange(0, M)
    real = tl.arange(0, M) < G
    row = QKV + b * qkv_row
    q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None],
                     other=0.0)
    q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
    if s == (n_old // BLOCK) // per_split:
        k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
        k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
        v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
        block = tl.load(TABLE + b * table_row + n_old // BLOCK)
        at = block * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
        tl.store(K + at, (k_new * cos + k_pair * sin).to(K.dtype.element_ty))
        tl.store(V + at, v_new)
        tl.debug_barrier()
    TILE: tl.constexpr = CHUNK * BLOCK
    t = tl.arange(0, TILE)
    m = tl.full([M], float("-inf"), tl.float32)
    w = tl.zeros([M], tl.float32)
    acc = tl.zeros([M, D], tl.float32)
    for i in tl.range(first, last, CHUNK, num_stages=STAGES):
        j = i + t // BLOCK  # each key's block index in the row's table
        block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
        at = block[:, None] * k_block + g * k_head + (t % BLOCK)[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)
        v = tl.load(V + at).to(tl.float32)
        scores = tl.dot(q, tl.trans(k))  # (M, TILE), tf32
        keep = (j < last) & (i * BLOCK + t < n_keys)
        scores = tl.where(keep[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
        acc = acc * rescale[:, None] + tl.dot(p, v)
        m = m_new
    if not PARTIALS:
        out = OUT + b * out_row + heads[:, None] * out_head + d[None, :]
        tl.store(out, (acc / w[:, None]).to(OUT.dtype.element_ty), mask=real[:, None])
    else:
        out = PART + b * part_row + heads[:, None] * part_head + s * part_split + d[None, :]
        tl.store(out, acc, mask=real[:, None])
        tl.store(MAX + b * max_row + heads * max_head + s, m, mask=real)
        tl.store(SUM + b * max_row + heads * max_head + s, w, mask=real)


def chunk_kernel_body(QKV, COS, SIN, K, V, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                      qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                      out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                      H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                      BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
                      PDL: tl.constexpr = False, CHUNK: tl.constexpr = 1, M: tl.constexpr = 16,
                      STAGES: tl.constexpr = 1, WIDTH: tl.constexpr = 64):
    """As kernels.fused_kernel_body (reductions, no dot), CHUNK blocks of keys a step."""
    b, g, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
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
    heads = g * G + tl.arange(0, G_PAD)
    real = tl.arange(0, G_PAD) < G
    row = QKV + b * qkv_row
    q = tl.load(row + heads[:, None] * qkv_head + d[None, :], mask=real[:, None], other=0.0)
    q_pair = tl.load(row + heads[:, None] * qkv_head + pair[None, :], mask=real[:, None],
                     other=0.0)
    q = (q.to(tl.float32) * cos[None, :] + q_pair.to(tl.float32) * sin[None, :]) * scale
    if s == (n_old // BLOCK) // per_split:
        k_new = tl.load(row + (H + g) * qkv_head + d).to(tl.float32)
        k_pair = tl.load(row + (H + g) * qkv_head + pair).to(tl.float32)
        v_new = tl.load(row + (H + H // G + g) * qkv_head + d)
        block = tl.load(TABLE + b * table_row + n_old // BLOCK)
        at = block * k_block + g * k_head + (n_old % BLOCK) * k_pos + d
        tl.store(K + at, (k_new * cos + k_pair * sin).to(K.dtype.element_ty))
        tl.store(V + at, v_new)
        tl.debug_barrier()
    TILE: tl.constexpr = CHUNK * BLOCK
    t = tl.arange(0, TILE)
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    w = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    for i in tl.range(first, last, CHUNK, num_stages=STAGES):
        j = i + t // BLOCK
        block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
        at = block[:, None] * k_block + g * k_head + (t % BLOCK)[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)
        v = tl.load(V + at).to(tl.float32)
        scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        keep = (j < last) & (i * BLOCK + t < n_keys)
        scores = tl.where(keep[None, :], scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=1))
        rescale = tl.exp(m - m_new)
        p = tl.exp(scores - m_new[:, None])
        w = w * rescale + tl.sum(p, axis=1)
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


dot_kernel = triton.jit(dot_kernel_body)
chunk_kernel = triton.jit(chunk_kernel_body)
