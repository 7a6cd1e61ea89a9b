"""lab.anatomy (notebook 01): the profiler's ops grouped by the code that issued them, and
the recorded kernels grouped by family."""

import os

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from tinyllm import KVCache
from tinyllm.generation import decode_step, prefill  # noqa: E402
from tinyllm.lab import anatomy


def test_quiet_stderr_silences_fd2_and_restores_it(capfd):
    with anatomy.quiet_stderr():
        os.write(2, b"profiler noise\n")
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    assert "profiler noise" not in err and "after" in err


@pytest.fixture(scope="module")
def toy_step_ops(toy_model):
    idx = torch.randint(0, toy_model.cfg.vocab_size, (2, 5))
    cache = KVCache(toy_model.cfg.n_layers)
    logits = prefill(toy_model, idx, cache)
    tok = logits[:, -1:].argmax(-1)
    events = anatomy.profile_ops(lambda: decode_step(toy_model, cache, tok, check=False))
    return anatomy.step_ops(events)


def test_step_ops_finds_every_layer_op_once_per_block(toy_model, toy_step_ops):
    n_layers = toy_model.cfg.n_layers
    counts = anatomy.op_counts(toy_step_ops, n_layers)
    rows = counts["rows"]
    # by the model's code: 4 projections (wqkv, wo, w13, w2) and 2 norms per block; the
    # LM head, the final norm
    # and the embedding outside the blocks
    assert (rows["Linear"]["per_layer"], rows["Linear"]["outside"]) == (4, 1)
    assert (rows["RMSNorm"]["per_layer"], rows["RMSNorm"]["outside"]) == (2, 1)
    assert rows["Embedding"]["outside_ops"] == {"embedding": 1}
    assert rows["model.attend"]["ops"] == {"scaled_dot_product_attention": 1}
    assert rows["kv_cache.update"]["ops"] == {"cat": 2}
    assert rows["Block"]["ops"] == {"add": 2}  # the two residual adds
    assert counts["compute"] == n_layers * counts["per_layer"] + counts["outside"]
    assert counts["compute"] + counts["views"] == len(toy_step_ops)
    assert counts["totals"]["linear"] == 4 * n_layers + 1
    assert sum(counts["totals"].values()) == counts["compute"]
    assert all(f"aten::{op}" in anatomy.VIEW_OPS for r in rows.values() for op in r["views"])
    table = anatomy.op_table(counts)
    assert table.splitlines()[-1].split()[:3] == [
        "total",
        str(counts["per_layer"]),
        str(counts["outside"]),
    ]
    assert f"= {counts['compute']} compute ops" in table


def test_op_counts_rejects_blocks_that_differ():
    ops = [("Linear", "linear", True)] * 3
    with pytest.raises(ValueError, match="not a multiple of n_layers 2"):
        anatomy.op_counts(ops, 2)


@pytest.mark.parametrize(
    "name, family",
    [
        ("nvjet_sm90_tst_8x64_64x16_4x1_v_bz_TNN", "matmul"),
        ("std::enable_if<!(false), void>::type internal::gemvx::kernel", "matmul"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits", "attention"),
        ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttent", "attention"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu", "matmul"),
        ("void at::native::(anonymous namespace)::vectorized_layer_nor", "norm"),
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_", "cat"),
        ("void at::native::index_elementwise_kernel<128, 4, at::native", "index"),
        ("void at::native::(anonymous namespace)::indexSelectSmallInde", "index"),
        ("void at::native::vectorized_elementwise_kernel<8, at::native", "elementwise"),
        ("Memcpy DtoD (Device -> Device)", "memcpy"),
        ("k0", "other"),
    ],
)
def test_kernel_family(name, family):
    assert anatomy.kernel_family(name) == family


def test_kernel_families_count_one_step():
    events = [
        {"step": s, "name": n, "start_us": 0.0, "dur_us": 1.0, "kind": kind}
        for s in (0, 1)
        for n, kind in (
            ("nvjet_a", "gpu"),
            ("CatArrayBatchedCopy", "gpu"),
            ("vectorized_elementwise_kernel", "gpu"),
            ("vectorized_elementwise_kernel", "gpu"),
            ("cudaLaunchKernel", "cpu"),
        )
    ]
    assert anatomy.kernel_families(events) == {"elementwise": 2, "matmul": 1, "cat": 1}
    assert anatomy.kernel_families(events, step=1) == {"elementwise": 2, "matmul": 1, "cat": 1}
