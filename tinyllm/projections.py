"""The paged decode step's matrix products, each one kernel with its norm or its add (notebook 11).

A decode layer is five steps: RMSNorm and the q/k/v projection; RoPE, the K/V write and the
attention (kernels.rope_write_splits); the output projection added to the residual; RMSNorm
and the gate/up projection with SwiGLU; the down projection added to the residual. Inductor
gave each layer about six kernels besides the attention's, at one row on an H200
(results/h200_projections.json). Here each product is one kernel, and the norm and the add
ride inside it:

    h = norm_project(x, norm_weight, w)        # rms_norm(x) @ w.T: the norm in the prologue
    h = norm_swiglu(x, norm_weight, w13)       # silu(gate) * up of rms_norm(x) @ w13.T
    x = project_add(h, w, x)                   # x + h @ w.T: the add in the epilogue
    x = combine_project_add(*splits, w, x)     # the attention's splits combined, then as above

x (B, K) is each row's input, w (N, K) a weight, as nn.Linear keeps it; w13 holds the gate's
rows, then the up's; splits are the attention's partial sums of each row, which
kernels.combine_kernel would otherwise combine in a kernel of its own. Each is a torch custom
op: on CUDA a Triton kernel, elsewhere the PyTorch reference, the same ops the model runs
without a paged step.

The kernel is made for a few rows. Program (n, b) owns a few outputs of a tile of rows (one
row, or 16; one row wherever it combines the splits, up to FOLD_ROWS rows). It reads their
rows of the weight once, then its rows of the input, normalises them (or combines the
splits), multiplies (one row: products summed in float32; a tile: tl.dot, accumulated in
float32) and writes the outputs, added or gated. The weight is read before anything the
kernel before wrote: with PDL (notebook 11, section 5) the kernel launches while the one
before still runs, reads its weights, and only then waits, at gdc_wait(), for the input. Past
GEMV_ROWS rows, a row tile re-reads the weights, and the model's plain ops run instead, which
torch.compile fuses with cuBLAS's products (decode_rows below decides).
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from tinyllm.kernels import (
    launch_combine,
    library_interpreted,
    pdl_launch,
    reference_combine,
    triton,
)

if triton is not None:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
else:  # macOS, Windows: the kernel's body below is never run

    class tl:  # what its annotations name
        constexpr = None


# The rows of a tile, multiplied together with tl.dot (it takes 16 and up); the most rows the
# model gives the hand-written kernels: one tile, each weight read once.
ROW_TILE = 16
GEMV_ROWS = ROW_TILE
# Outputs a program owns, and its warps: for a tile of rows, and for one row whose program
# combines the attention's splits first (each such program reads every split).
BLOCK_N = 16
NUM_WARPS = 4
# One row's other programs: 4 outputs, one warp. On the H200 the step at batch 1 took 45.1 µs
# with 16 outputs and 4 warps, 43.5 with 8 and 1, 40.8 with 4 and 1, in one run
# (results/h200_folded.json); 2 outputs matched 4 in a later one.
ROW_BLOCK_N = 4
ROW_WARPS = 1
# The most rows whose output projection combines the attention's splits itself, one row a
# program; past it the combine kernel runs first, then a tile of rows. In two runs on an H100
# the fold at every batch ran the step faster at 2, 4 and 8 rows and slower at 16, and this
# rule kept 16 rows' step (results/h100_fold_rows.json). No H200 has run it past one row.
FOLD_ROWS = 8


def decode_rows(x: Tensor) -> bool:
    """Whether a step of x's rows runs the hand-written kernels: 1 to GEMV_ROWS rows."""
    return x.shape[0] <= GEMV_ROWS


# --- the references: what the model runs without a paged step ----------------------------


def reference_norm_project(x, norm_weight, w, eps) -> Tensor:
    return F.linear(F.rms_norm(x, (x.shape[-1],), norm_weight, eps), w)


def reference_norm_swiglu(x, norm_weight, w13, eps) -> Tensor:
    gate, up = reference_norm_project(x, norm_weight, w13, eps).chunk(2, dim=-1)
    return F.silu(gate) * up


def reference_project_add(x, w, residual) -> Tensor:
    return residual + F.linear(x, w)


def reference_combine_project_add(part, maxes, sums, w, residual) -> Tensor:
    x = reference_combine(part, maxes, sums).to(residual.dtype)
    return reference_project_add(x.view(x.shape[0], -1), w, residual)


# --- the Triton kernel ---------------------------------------------------------------------


def projection_kernel_body(X, NORM_W, W, RES, OUT, MAX, SUM, eps, n_rows, n_out, x_row, res_row,
                           out_row, K: tl.constexpr, K_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_B: tl.constexpr, NORM: tl.constexpr, SWIGLU: tl.constexpr,
                           ADD: tl.constexpr, COMBINE: tl.constexpr, D: tl.constexpr,
                           N_SPLITS: tl.constexpr, PRECISION: tl.constexpr,
                           PDL: tl.constexpr = False):  # fmt: skip
    """Program (n, b): outputs n·BLOCK_N .. of rows b·BLOCK_B .. . NORM: RMSNorm of each input
    row first, with weight NORM_W. SWIGLU: silu of the outputs times the outputs n_out rows
    further down W. ADD: plus RES's rows. COMBINE: the input is the attention's splits, X
    (rows, K / D heads, N_SPLITS, D) with MAX and SUM (rows, K / D, N_SPLITS), combined
    first as kernels.combine_kernel does. One row: products summed in float32; a tile of
    rows (BLOCK_B >= 16): tl.dot, the tensor cores' product, accumulated in float32."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.program_id(1) * BLOCK_B + tl.arange(0, BLOCK_B)
    k = tl.arange(0, K_PAD)
    at = cols[:, None] * K + k[None, :]
    inside = (cols[:, None] < n_out) & (k[None, :] < K)
    w = tl.load(W + at, mask=inside, other=0.0)  # (BLOCK_N, K_PAD): the weight, read once
    if SWIGLU:
        w_up = tl.load(W + n_out * K + at, mask=inside, other=0.0)
    if BLOCK_B == 1:  # one row: its products in float32, the weight widened while it waits
        w = w.to(tl.float32)
        if SWIGLU:
            w_up = w_up.to(tl.float32)
    if NORM:
        g = tl.load(NORM_W + k, mask=k < K, other=0.0).to(tl.float32)
    if PDL:
        tl.extra.cuda.gdc_wait()  # the weights are read: now wait for the input's writer
        tl.extra.cuda.gdc_launch_dependents()  # and let the next kernel launch, to read its own
    real = rows[:, None] < n_rows
    if COMBINE:  # each head's splits, weighted by exp(max - the head's max), then divided
        h, s, d = tl.arange(0, K_PAD // D), tl.arange(0, N_SPLITS), tl.arange(0, D)
        at = (rows[:, None, None] * (K // D) + h[None, :, None]) * N_SPLITS + s[None, None, :]
        ok = (rows < n_rows)[:, None, None] & (h < K // D)[None, :, None]
        m = tl.load(MAX + at, mask=ok, other=0.0)  # (BLOCK_B, heads, N_SPLITS); pads: 0, 1
        w_sum = tl.load(SUM + at, mask=ok, other=1.0)
        part = tl.load(X + at[:, :, :, None] * D + d[None, None, None, :],
                       mask=ok[:, :, :, None], other=0.0)  # fmt: skip
        scale = tl.exp(m - tl.max(m, axis=2)[:, :, None])  # a split with no keys: 0
        x = tl.sum(scale[:, :, :, None] * part, axis=2) / tl.sum(scale * w_sum, axis=2)[:, :, None]
        x = tl.reshape(x, (BLOCK_B, K_PAD)).to(OUT.dtype.element_ty)  # as combine's output
    else:
        x = tl.load(X + rows[:, None] * x_row + k[None, :], mask=real & (k[None, :] < K),
                    other=0.0)  # fmt: skip
    if NORM:  # as F.rms_norm: in float32, scaled by the weight, rounded to the dtype
        xf = x.to(tl.float32)
        xf = xf * tl.rsqrt(tl.sum(xf * xf, axis=1) / K + eps)[:, None] * g[None, :]
        x = xf.to(X.dtype.element_ty)
    if BLOCK_B == 1:  # (1, BLOCK_N): each output a sum of products along K
        xf = x.to(tl.float32)  # (1, K_PAD)
        y = tl.sum(w * xf, axis=1)[None, :]
        if SWIGLU:
            up = tl.sum(w_up * xf, axis=1)[None, :]
    elif PRECISION == "ieee":  # (BLOCK_B, BLOCK_N) in float32: float32 weights, or a CPU
        xf = x.to(tl.float32)
        y = tl.dot(xf, tl.trans(w.to(tl.float32)), input_precision="ieee")
        if SWIGLU:
            up = tl.dot(xf, tl.trans(w_up.to(tl.float32)), input_precision="ieee")
    else:  # (BLOCK_B, BLOCK_N) from the dtype's own products: bf16 or fp16 on a GPU
        y = tl.dot(x, tl.trans(w))
        if SWIGLU:
            up = tl.dot(x, tl.trans(w_up))
    dt = OUT.dtype.element_ty  # each result rounded to it, as a PyTorch op's
    y = y.to(dt).to(tl.float32)
    if SWIGLU:  # as F.silu(gate) * up
        y = (y / (1 + tl.exp(-y))).to(dt).to(tl.float32) * up.to(dt).to(tl.float32)
    out = real & (cols[None, :] < n_out)
    if ADD:
        y = y.to(dt).to(tl.float32) + tl.load(RES + rows[:, None] * res_row + cols[None, :],
                                               mask=out).to(tl.float32)  # fmt: skip
    tl.store(OUT + rows[:, None] * out_row + cols[None, :], y.to(dt), mask=out)


if triton is not None:
    projection_kernel = triton.jit(projection_kernel_body)


def triton_projection(x, norm_weight, w, residual, eps, swiglu=False, kernel=None,
                      splits=None) -> Tensor:  # fmt: skip
    """Launch the kernel: grid (outputs / the outputs of a program, rows / the row tile: 1 for
    one row, else ROW_TILE); a program owns ROW_BLOCK_N outputs with ROW_WARPS warps at one
    row, else BLOCK_N with NUM_WARPS. norm_weight None: no norm; residual None: no add. splits:
    (max, sum), x the attention's splits (B, H, S, D), combined in the prologue, one row a
    program at any batch it is given (combine_project_add gives it up to FOLD_ROWS rows),
    BLOCK_N outputs with NUM_WARPS (a tile's program would hold 16 rows' splits). PDL on
    Hopper and later GPUs."""
    B, K = x.shape[0], w.shape[1]
    n_out = w.shape[0] // 2 if swiglu else w.shape[0]
    dtype = x.dtype if splits is None else w.dtype
    out = torch.empty(B, n_out, dtype=dtype, device=x.device)
    if splits is not None:  # a program combines its row's splits: one row a program
        block_b, block_n, warps = 1, BLOCK_N, NUM_WARPS
    elif B == 1:
        block_b, block_n, warps = 1, ROW_BLOCK_N, ROW_WARPS
    else:
        block_b, block_n, warps = ROW_TILE, BLOCK_N, NUM_WARPS
    maxes, sums = (x, x) if splits is None else splits
    (kernel or projection_kernel)[(triton.cdiv(n_out, block_n), triton.cdiv(B, block_b))](
        x, x if norm_weight is None else norm_weight, w, x if residual is None else residual,
        out, maxes, sums, eps, B, n_out, x.stride(0),
        0 if residual is None else residual.stride(0), out.stride(0), K=K,
        K_PAD=triton.next_power_of_2(K), BLOCK_N=block_n, BLOCK_B=block_b,
        NORM=norm_weight is not None, SWIGLU=swiglu, ADD=residual is not None,
        COMBINE=splits is not None, D=1 if splits is None else x.shape[-1],
        N_SPLITS=1 if splits is None else x.shape[2],
        PRECISION="ieee" if dtype == torch.float32 or x.device.type == "cpu" else "mma",
        num_warps=warps,
        **pdl_launch(x.device),
    )  # fmt: skip
    return out


def interpreted_projection(x, norm_weight, w, residual, eps, swiglu=False, splits=None) -> Tensor:
    """The kernel run by Triton's interpreter, on CPU tensors (tests and notebook 11)."""
    if triton is None:
        raise RuntimeError("Triton is not installed here (it installs on Linux): the "
                           "reference runs instead")  # fmt: skip
    kernel = InterpretedFunction(projection_kernel_body)
    if isinstance(projection_kernel, InterpretedFunction):  # TRITON_INTERPRET=1 at import
        kernel = None
    with library_interpreted():
        return triton_projection(x, norm_weight, w, residual, eps, swiglu, kernel, splits)


# --- the custom ops ----------------------------------------------------------------------


@torch.library.custom_op("tinyllm::norm_project", mutates_args=())
def norm_project(x: Tensor, norm_weight: Tensor, w: Tensor, eps: float) -> Tensor:
    """rms_norm(x) @ w.T, for x (B, K) and w (N, K): (B, N)."""
    return reference_norm_project(x, norm_weight, w, eps)


@torch.library.custom_op("tinyllm::norm_swiglu", mutates_args=())
def norm_swiglu(x: Tensor, norm_weight: Tensor, w13: Tensor, eps: float) -> Tensor:
    """silu(gate) * up, gate and up the two halves of rms_norm(x) @ w13.T: (B, N / 2)."""
    return reference_norm_swiglu(x, norm_weight, w13, eps)


@torch.library.custom_op("tinyllm::project_add", mutates_args=())
def project_add(x: Tensor, w: Tensor, residual: Tensor) -> Tensor:
    """residual + x @ w.T, for x (B, K), w (N, K) and residual (B, N)."""
    return reference_project_add(x, w, residual)


@torch.library.custom_op("tinyllm::combine_project_add", mutates_args=())
def combine_project_add(part: Tensor, maxes: Tensor, sums: Tensor, w: Tensor,
                        residual: Tensor) -> Tensor:  # fmt: skip
    """residual + combine(part, maxes, sums) @ w.T: the attention's splits of each row
    (kernels.rope_write_splits: (B, H, S, D), (B, H, S), (B, H, S)) combined into its output
    (B, H·D), then the output projection and the residual add."""
    return reference_combine_project_add(part, maxes, sums, w, residual)


if triton is not None:

    @norm_project.register_kernel("cuda")
    def _(x, norm_weight, w, eps):
        return triton_projection(x, norm_weight, w, None, eps)

    @norm_swiglu.register_kernel("cuda")
    def _(x, norm_weight, w13, eps):
        return triton_projection(x, norm_weight, w13, None, eps, swiglu=True)

    @project_add.register_kernel("cuda")
    def _(x, w, residual):
        return triton_projection(x, None, w, residual, 0.0)

    @combine_project_add.register_kernel("cuda")
    def _(part, maxes, sums, w, residual):
        if part.shape[0] <= FOLD_ROWS:  # each row's programs combine its splits: one kernel
            return triton_projection(part, None, w, residual, 0.0, splits=(maxes, sums))
        B, H, _, D = part.shape  # the combine kernel first, then a tile of rows
        x = launch_combine(part, maxes, sums, part.new_empty(B, H, D, dtype=residual.dtype))
        return triton_projection(x.view(B, H * D), None, w, residual, 0.0)


@norm_project.register_fake
def _(x, norm_weight, w, eps):
    return x.new_empty(x.shape[0], w.shape[0])


@norm_swiglu.register_fake
def _(x, norm_weight, w13, eps):
    return x.new_empty(x.shape[0], w13.shape[0] // 2)


@project_add.register_fake
def _(x, w, residual):
    return torch.empty_like(residual)


@combine_project_add.register_fake
def _(part, maxes, sums, w, residual):
    return torch.empty_like(residual)
