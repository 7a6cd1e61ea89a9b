"""probe79's kernel: the package's fused kernel (tinyllm/kernels.py, fused_kernel_body) with one
change: a split holds at least MIN_BLOCKS blocks, so a short row is attended by fewer programs
(the rest find no block and write max -inf, weight 0), while a long one still spreads over
every split of the grid. The grid stays (B, H_kv, n_splits), fixed by the batch."""
import triton
import triton.language as tl

def adaptive_kernel_body(QKV, COS, SIN, K, V, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                      qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                      out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                      H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                      BLOCK: tl.constexpr, N_SPLITS: tl.constexpr, PARTIALS: tl.constexpr,
                      DOT: tl.constexpr = False, CHUNK: tl.constexpr = 1,
                      STAGES: tl.constexpr = 1, PDL: tl.constexpr = False,
                      MIN_BLOCKS: tl.constexpr = 1):  # fmt: skip
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
    per_split = tl.maximum(tl.cdiv(n_blocks, N_SPLITS), MIN_BLOCKS)  # at least MIN_BLOCKS a split
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



adaptive_kernel = triton.jit(adaptive_kernel_body)
