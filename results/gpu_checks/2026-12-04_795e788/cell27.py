"""Notebook 11's check of the fused kernel against the reference (cell 27), on the GPU."""
import torch
from tinyllm import kernels
ON_GPU, device = True, "cuda"
g = torch.Generator().manual_seed(0)
lens = torch.tensor([0, 15, 16, 40], dtype=torch.int32)  # keys before the step
H, H_kv, D, block = 4, 2, 16, 16
qkv = torch.randn(4, H + 2 * H_kv, D, generator=g)
angle = torch.rand(64, D // 2, generator=g) * 6
cos, sin = angle.cos(), angle.sin()
pool = [torch.randn(13, H_kv, block, D, generator=g) for _ in range(2)]
table = torch.arange(1, 13, dtype=torch.int32).reshape(4, 3)
ref_k, ref_v = (p.clone() for p in pool)
want = kernels.reference_rope_write_attend(qkv, cos, sin, ref_k, ref_v, table, lens)
launch, how = kernels.triton_rope_write_attend, "compiled for the GPU"
for n_splits in (4, 2):
    form = "tl.dot" if kernels.tensor_cores(table.shape[1], n_splits) else "sums of products"
    bound = 1e-2 if ON_GPU and form == "tl.dot" else 1e-5
    args = [t.to(device) for t in (qkv, cos, sin, pool[0], pool[1], table, lens)]
    got = launch(*args, n_splits=n_splits).cpu()
    diff = (got - want).abs().max()
    print(f"{n_splits} shares, {form}, {how}: against the reference, largest difference "
          f"{diff:.0e} (under {bound:.0e}: {diff < bound}); keys written within 1e-6: "
          f"{torch.allclose(args[3].cpu(), ref_k, atol=1e-6)}; values equal: "
          f"{torch.equal(args[4].cpu(), ref_v)}")
