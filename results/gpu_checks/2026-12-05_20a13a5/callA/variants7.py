"""Issue 27, stop 48: the fused kernel whose row's shares meet at a thread-block cluster's barrier
instead of a kernel boundary. Grid (1, B, H_kv) launched as clusters of N_SPLITS programs along
x (Triton's launcher does that for num_ctas > 1: x times num_ctas programs, a cluster each
num_ctas; here the kernel is compiled as an ordinary one and only its launch is clustered). Each
program writes its share's partials as the package's kernel does; then the cluster's barrier
(barrier.cluster.arrive.release / wait.acquire, inline PTX); then the last program of the
cluster combines the K/V head's query heads, reading the partials past L1 (.cg), and write the output.
One kernel, no combine kernel. SYNC=False under Triton's interpreter, whose programs run one
after another, so the last ones find every share written."""
import torch
import triton
import triton.language as tl
from tinyllm import kernels as K


@triton.jit
def cluster_sync(x):
    """All threads of the cluster meet; prior writes are seen by every program of it. Returns 0,
    to be added to the addresses read after it (a data dependence on the barrier)."""
    return tl.inline_asm_elementwise(
        "barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;\n\tmov.u32 $0, 0;",
        "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def cluster_kernel(QKV, COS, SIN, K, V, TABLE, LENS, OUT, PART, MAX, SUM, scale,
                   qkv_row, qkv_head, rope_row, k_block, k_head, k_pos, table_row, lens_row,
                   out_row, out_head, part_row, part_head, part_split, max_row, max_head,
                   H: tl.constexpr, G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
                   BLOCK: tl.constexpr, N_SPLITS: tl.constexpr,
                   DOT: tl.constexpr = False, CHUNK: tl.constexpr = 1,
                   STAGES: tl.constexpr = 1, PDL: tl.constexpr = False,
                   SYNC: tl.constexpr = True):
    s, b, g = tl.program_id(0), tl.program_id(1), tl.program_id(2)
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
    m = tl.full([G_PAD], float("-inf"), tl.float32)
    w = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D], tl.float32)
    key = tl.arange(0, CHUNK * BLOCK)
    for i in tl.range(first, last, CHUNK, num_stages=STAGES):
        j = i + key // BLOCK
        block = tl.load(TABLE + b * table_row + j, mask=j < last, other=0)
        at = block[:, None] * k_block + g * k_head + (key % BLOCK)[:, None] * k_pos + d[None, :]
        k = tl.load(K + at).to(tl.float32)
        v = tl.load(V + at).to(tl.float32)
        if DOT:
            scores = tl.dot(q, tl.trans(k))
        else:
            scores = tl.sum(q[:, None, :] * k[None, :, :], axis=2)
        scores = tl.where(((j < last) & (i * BLOCK + key < n_keys))[None, :], scores,
                          float("-inf"))
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
    zero = s * 0
    if SYNC:
        zero = cluster_sync(s)
    if s == N_SPLITS - 1:  # the cluster's last program: every query head of the K/V head
        r = tl.arange(0, N_SPLITS)
        for x in tl.static_range(G):
            h = g * G + x
            at = zero + b * max_row + h * max_head + r
            mm = tl.load(MAX + at, cache_modifier=".cg")
            ww = tl.load(SUM + at, cache_modifier=".cg")
            sc = tl.exp(mm - tl.max(mm, axis=0))
            pp = tl.load(PART + zero + b * part_row + h * part_head + r[:, None] * part_split
                         + d[None, :], cache_modifier=".cg")
            o = tl.sum(sc[:, None] * pp, axis=0) / tl.sum(sc * ww, axis=0)
            tl.store(OUT + b * out_row + h * out_head + d, o.to(OUT.dtype.element_ty))


_clustered = set()


def op(qkv, cos, sin, k_cache, v_cache, block_table, lens, n_splits=16, dot=None, chunk=None,
       stages=None, num_warps=2, kernel=None, sync=True):
    """The op in one clustered launch: n_splits shares a row, one cluster of n_splits programs
    per row and K/V head (n_splits from 2 to 16, a power of two)."""
    kernel = kernel or cluster_kernel
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    G = H // H_kv
    width = block_table.shape[1]
    dot = K.tensor_cores(width, n_splits) if dot is None else dot
    if chunk is None:
        chunk, stages = K.share_passes(width, n_splits)
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    args = (qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
            qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
            k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0),
            out.stride(1), part.stride(0), part.stride(1), part.stride(2), m.stride(0),
            m.stride(1))
    consts = dict(H=H, G=G, G_PAD=max(16 if dot else 2, triton.next_power_of_2(G)), D=D,
                  BLOCK=block_size, N_SPLITS=n_splits, DOT=dot, CHUNK=chunk, STAGES=stages,
                  num_warps=num_warps, SYNC=sync, **K.pdl_launch(qkv.device))
    if qkv.device.type == "cuda":
        grid = (1, B, H_kv)
        compiled = kernel.warmup(*args, grid=grid, **consts)
        if id(compiled) not in _clustered:  # launched as clusters of n_splits programs
            compiled._init_handles()
            compiled.packed_metadata = (compiled.metadata.num_warps, n_splits,
                                        compiled.metadata.shared)
            _clustered.add(id(compiled))
        kernel[grid](*args, **consts)
    else:
        kernel[(n_splits, B, H_kv)](*args, **consts)
    return out


# --- the control CUB's pull request ran: the package's kernels with no PDL trigger at all ---
# (each still launches with PDL and waits at gdc_wait; with no trigger, the next kernel may
# launch only as this one's programs finish). Built from the package's own source.
import importlib.util  # noqa: E402
import inspect  # noqa: E402
import pathlib  # noqa: E402
import tempfile  # noqa: E402

TRIGGER = "        tl.extra.cuda.gdc_launch_dependents()\n"


def untriggered(*functions):
    src = "import triton\nimport triton.language as tl\n\n\n"
    for f in functions:
        body = inspect.getsource(f)
        assert body.count(TRIGGER) == 1, f.__name__
        src += body.replace(TRIGGER, "") + "\n\n"
    path = pathlib.Path(tempfile.mkdtemp()) / "untriggered_kernels.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("untriggered_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [triton.jit(getattr(module, f.__name__)) for f in functions]


fused_untriggered, combine_untriggered = untriggered(K.fused_kernel_body, K.combine_kernel_body)


def op_untriggered(*args, shares=False):
    return K.triton_rope_write_attend(*args, kernels=(fused_untriggered, combine_untriggered),
                                      shares=shares)
