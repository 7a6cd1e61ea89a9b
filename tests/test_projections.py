"""projections.py: the three matrix-product kernels (run by Triton's interpreter on the CPU)
against their PyTorch references, in float32 and bf16, with row counts past one tile and
widths that are not powers of two; the model's paged decode step through them equal, bit for
bit, to the same step through the plain ops on the CPU (the references are those ops)."""

import pytest
import torch

from tinyllm import GraphDecoder, projections
from tinyllm.lab.prompts import prompt_batch

triton_needed = pytest.mark.skipif(projections.triton is None, reason="Triton installs on Linux")

SHAPES = [(1, 256, 512), (3, 768, 256), (17, 64, 40), (2, 48, 24)]  # rows, K, N


def operands(B, K, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, norm_w = torch.randn(B, K, generator=g), torch.randn(K, generator=g)
    w, res = torch.randn(N, K, generator=g) * 0.05, torch.randn(B, N, generator=g)
    return (t.to(dtype) for t in (x, norm_w, w, res))


@triton_needed
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_the_interpreted_kernel_computes_each_reference(shape, dtype):
    x, norm_w, w, res = operands(*shape, dtype)
    tol = 1e-5 if dtype == torch.float32 else 0.1  # bf16: a rounding or two of values ~1
    pairs = (
        (projections.interpreted_projection(x, norm_w, w, None, 1e-5),
         projections.reference_norm_project(x, norm_w, w, 1e-5)),
        (projections.interpreted_projection(x, norm_w, w, None, 1e-5, swiglu=True),
         projections.reference_norm_swiglu(x, norm_w, w, 1e-5)),
        (projections.interpreted_projection(x, None, w, res, 0.0),
         projections.reference_project_add(x, w, res)),
    )  # fmt: skip
    for got, want in pairs:
        assert got.dtype == dtype and got.shape == want.shape
        assert (got.float() - want.float()).abs().max() <= tol * max(1.0, want.abs().max())


@triton_needed
def test_a_wrong_weight_row_is_caught():
    """The comparison above can fail: a kernel fed one weight row changed differs."""
    x, norm_w, w, _ = operands(2, 64, 40, torch.float32)
    bad = w.clone()
    bad[7] += 1
    got = projections.interpreted_projection(x, norm_w, bad, None, 1e-5)
    want = projections.reference_norm_project(x, norm_w, w, 1e-5)
    assert (got - want).abs().max() > 1e-2


def splits_of(B, H, S, D, seed=0):
    """An attention's splits: random partials, maxima and weights, the last split of each
    row empty (no keys: max -inf, weight 0) when there are two or more."""
    g = torch.Generator().manual_seed(seed)
    part, m = torch.randn(B, H, S, D, generator=g), torch.randn(B, H, S, generator=g)
    w = torch.rand(B, H, S, generator=g) + 0.5
    if S > 1:
        part[:, :, -1], m[:, :, -1], w[:, :, -1] = 0.0, float("-inf"), 0.0
    return part, m, w


@triton_needed
@pytest.mark.parametrize("S", [1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("B", [1, 3])
def test_the_interpreted_kernel_combines_the_shares_then_projects(S, dtype, B):
    """Each row's programs combine its splits in the kernel's prologue, then the product and
    the add: the reference's output, and a row's output whatever the other rows hold."""
    part, m, w_sum = splits_of(B, 4, S, 16)
    _, _, w, res = operands(B, 64, 40, dtype)
    want = projections.reference_combine_project_add(part, m, w_sum, w, res)
    got = projections.interpreted_projection(part, None, w, res, 0.0, splits=(m, w_sum))
    tol = 1e-5 if dtype == torch.float32 else 0.1
    assert got.dtype == dtype and got.shape == want.shape
    assert (got.float() - want.float()).abs().max() <= tol * max(1.0, want.abs().max())
    last = projections.interpreted_projection(part[-1:], None, w, res[-1:], 0.0,
                                              splits=(m[-1:], w_sum[-1:]))  # fmt: skip
    assert torch.equal(got[-1:], last)
    bad = w_sum.clone()
    bad[-1, 2, 0] *= 2  # one split's weight wrong: a different output in that row alone
    wrong = projections.interpreted_projection(part, None, w, res, 0.0, splits=(m, bad))
    assert (wrong[-1].float() - want[-1].float()).abs().max() > 1e-2
    assert torch.equal(wrong[:-1], got[:-1])


def test_the_ops_are_their_references_on_the_cpu():
    x, norm_w, w, res = operands(3, 64, 40, torch.float32)
    assert torch.equal(projections.norm_project(x, norm_w, w, 1e-5),
                       projections.reference_norm_project(x, norm_w, w, 1e-5))  # fmt: skip
    assert torch.equal(projections.project_add(x, w, res), res + x @ w.T)
    part, m, w_sum = splits_of(3, 4, 2, 16)
    y = (part * (m - m.amax(2, keepdim=True)).exp()[..., None]).sum(2)
    y = y / ((m - m.amax(2, keepdim=True)).exp() * w_sum).sum(2)[..., None]
    got = projections.combine_project_add(part, m, w_sum, w, res)
    torch.testing.assert_close(got, res + y.reshape(3, 64) @ w.T)


@pytest.mark.parametrize("batch", [1, 3])
def test_the_paged_step_through_the_ops_equals_the_plain_ops(shipped_model, batch, monkeypatch):
    """decode_rows sends a step of up to GEMV_ROWS rows through the three ops; past it, the
    model's plain ops run. On the CPU both are the same ops: the same logits, bit for bit."""
    idx = prompt_batch(batch, 12, "cpu")
    outs = []
    for rows in (projections.GEMV_ROWS, 0):
        monkeypatch.setattr(projections, "GEMV_ROWS", rows)
        dec = GraphDecoder(shipped_model, batch, kv="paged", use_graph=False)
        tok = dec.prefill(idx)[:, -1:].argmax(-1)
        outs.append(torch.cat([dec.step(tok) for _ in range(3)]))
    assert torch.equal(outs[0], outs[1])
