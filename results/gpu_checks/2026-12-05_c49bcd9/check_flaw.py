# Run on a CPU (make install), 2026-12-05: prints "first 0.0" and "second 0.8175122737884521".
# probe71's checks, run on the CPU with the reference op as every variant: the first variant's
# replays (new qkv and length each) overwrite the pools, so a later variant's eager call differs
# from the reference computed before them, though the op is the same function.
import torch
from tinyllm import kernels
H, H_kv, D, width, B, n = 8, 4, 32, 64, 1, 128
gen = torch.Generator().manual_seed(0)
qkv = torch.randn(B, H + 2 * H_kv, D, generator=gen)
angle = torch.rand(1024, D // 2, generator=gen)
wide = torch.randn(B * width + 1, H_kv, 16, D, generator=gen)
rows = (torch.arange(B * width, dtype=torch.int32) + 1).view(B, width)
lens = torch.full((B,), n - 1, dtype=torch.int32)
args = (qkv, angle.cos(), angle.sin(), wide, wide.clone(), rows, lens)
ref = kernels.reference_rope_write_attend(qkv.clone(), args[1], args[2], wide.clone(), wide.clone(), rows, lens)
for name in ("first", "second"):
    eager = kernels.reference_rope_write_attend(*args)
    print(name, float((eager - ref).abs().max()))
    for r in range(100):  # the 'replays': new inputs, the op writes the pools
        qkv.copy_(torch.randn(qkv.shape, generator=gen)); lens.fill_(int(torch.randint(0, n, (1,), generator=gen)))
        kernels.reference_rope_write_attend(*args)
    qkv.copy_(args[0]); lens.fill_(n - 1)
