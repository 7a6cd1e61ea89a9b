"""The paged decode step's matrix products, each one kernel with its norm or its add (notebook 11).

A decode layer is five steps: RMSNorm and the q/k/v projection; RoPE, the K/V write and the
attention (kernels.rope_write_attend); the output projection added to the residual; RMSNorm
and the gate/up projection with SwiGLU; the down projection added to the residual. Inductor
gave each layer about six kernels besides the attention's, at one row on an H200
(results/h200_projections.json). Here each product is one kernel, and the norm and the add
ride inside it:

    h = norm_project(x, norm_weight, w)        # rms_norm(x) @ w.T: the norm in the prologue
    h = norm_swiglu(x, norm_weight, w13)       # silu(gate) * up of rms_norm(x) @ w13.T
    x = project_add(h, w, x)                   # x + h @ w.T: the add in the epilogue

x (B, K) is each row's input, w (N, K) a weight, as nn.Linear keeps it; w13 holds the gate's
rows, then the up's. Each is a torch custom op: on CUDA a Triton kernel, elsewhere the
PyTorch reference, the same ops the model runs without a paged step.

The kernel is made for a few rows. Program (n, b) owns BLOCK_N outputs of a tile of rows (one
row, or 16). It reads its BLOCK_N rows of the weight once, then its rows of the input,
normalises them, multiplies (one row: products summed in float32; a tile: tl.dot, accumulated
in float32) and writes the outputs, added or gated. The weight is read before anything the
kernel before wrote: with PDL (notebook 11, section 5) the
kernel launches while the one before still runs, reads its weights, and only then waits, at
gdc_wait(), for the input. Past GEMV_ROWS rows, a row tile re-reads the weights, and the
model's plain ops run instead, which torch.compile fuses with cuBLAS's products
(decode_rows below decides).
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from tinyllm.kernels import library_interpreted, pdl_launch, triton

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
# Outputs a program owns, and its warps.
BLOCK_N = 16
NUM_WARPS = 4


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


# --- the Triton kernel ---------------------------------------------------------------------


def projection_kernel_body(X, NORM_W, W, RES, OUT, eps, n_rows, n_out, x_row, res_row, out_row,
                           K: tl.constexpr, K_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_B: tl.constexpr, NORM: tl.constexpr, SWIGLU: tl.constexpr,
                           ADD: tl.constexpr, PRECISION: tl.constexpr,
                           PDL: tl.constexpr = False):  # fmt: skip
    """Program (n, b): outputs n·BLOCK_N .. of rows b·BLOCK_B .. . NORM: RMSNorm of each input
    row first, with weight NORM_W. SWIGLU: silu of the outputs times the outputs n_out rows
    further down W. ADD: plus RES's rows. One row: products summed in float32; a tile of rows
    (BLOCK_B >= 16): tl.dot, the tensor cores' product, accumulated in float32."""
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
        tl.extra.cuda.gdc_launch_dependents()  # and let the next kernel launch, to read its
    real = rows[:, None] < n_rows
    x = tl.load(X + rows[:, None] * x_row + k[None, :], mask=real & (k[None, :] < K), other=0.0)
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


def triton_projection(x, norm_weight, w, residual, eps, swiglu=False, kernel=None) -> Tensor:
    """Launch the kernel: grid (outputs / BLOCK_N, rows / the row tile: 1 for one row, else
    ROW_TILE). norm_weight None: no norm; residual None: no add. PDL on Hopper and later GPUs."""
    B, K = x.shape
    n_out = w.shape[0] // 2 if swiglu else w.shape[0]
    out = torch.empty(B, n_out, dtype=x.dtype, device=x.device)
    block_b = 1 if B == 1 else ROW_TILE
    (kernel or projection_kernel)[(triton.cdiv(n_out, BLOCK_N), triton.cdiv(B, block_b))](
        x, x if norm_weight is None else norm_weight, w, x if residual is None else residual,
        out, eps, B, n_out, x.stride(0), 0 if residual is None else residual.stride(0),
        out.stride(0), K=K, K_PAD=triton.next_power_of_2(K), BLOCK_N=BLOCK_N, BLOCK_B=block_b,
        NORM=norm_weight is not None, SWIGLU=swiglu, ADD=residual is not None,
        PRECISION="ieee" if x.dtype == torch.float32 or x.device.type == "cpu" else "mma",
        num_warps=NUM_WARPS,
        **pdl_launch(x.device),
    )  # fmt: skip
    return out


def interpreted_projection(x, norm_weight, w, residual, eps, swiglu=False) -> Tensor:
    """The kernel run by Triton's interpreter, on CPU tensors (tests and notebook 11)."""
    if triton is None:
        raise RuntimeError("Triton is not installed here (it installs on Linux): the "
                           "reference runs instead")  # fmt: skip
    kernel = InterpretedFunction(projection_kernel_body)
    if isinstance(projection_kernel, InterpretedFunction):  # TRITON_INTERPRET=1 at import
        kernel = None
    with library_interpreted():
        return triton_projection(x, norm_weight, w, residual, eps, swiglu, kernel)


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


@norm_project.register_fake
def _(x, norm_weight, w, eps):
    return x.new_empty(x.shape[0], w.shape[0])


@norm_swiglu.register_fake
def _(x, norm_weight, w13, eps):
    return x.new_empty(x.shape[0], w13.shape[0] // 2)


@project_add.register_fake
def _(x, w, residual):
    return torch.empty_like(residual)
