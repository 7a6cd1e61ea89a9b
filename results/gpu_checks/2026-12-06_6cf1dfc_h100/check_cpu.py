"""The variant under Triton's interpreter on the CPU, against the reference and the package's
interpreted kernel: outputs and the pools' writes."""
import torch
from triton.runtime.interpreter import InterpretedFunction

from tinyllm import kernels as K
from proto83 import variant83 as V

torch.manual_seed(0)
H, H_kv, D, BS, W = 8, 4, 32, 16, 8
for B, S, dot in ((1, 4, False), (3, 2, True), (2, 8, False), (3, 1, False)):
    qkv = torch.randn(B, H + 2 * H_kv, D)
    angle = torch.rand(W * BS, D // 2) * 6
    cos, sin = angle.cos(), angle.sin()
    pk = torch.randn(B * W + 1, H_kv, BS, D)
    pv = torch.randn(B * W + 1, H_kv, BS, D)
    table = (torch.randperm(B * W) + 1).int().view(B, W)
    lens = torch.randint(0, W * BS - 1, (B,), dtype=torch.int32)
    lens[0] = 0
    k1, v1, k2, v2 = pk.clone(), pv.clone(), pk.clone(), pv.clone()
    want = K.reference_rope_write_attend(qkv, cos, sin, k1, v1, table, lens)
    with K.library_interpreted():
        got = V.launch(qkv, cos, sin, k2, v2, table, lens, n_splits=S, dot=dot,
                       kernel=InterpretedFunction(V.heads_kernel_body),
                       combine=InterpretedFunction(K.combine_kernel_body))
    pkg = K.interpreted_rope_write_attend(qkv, cos, sin, pk.clone(), pv.clone(), table, lens, n_splits=S)
    print(B, S, dot, "vs reference", (got - want).abs().max().item(), "vs package",
          (got - pkg).abs().max().item(), "writes equal", torch.equal(k1, k2) and torch.equal(v1, v2))
    k3, v3 = pk.clone(), pv.clone()
    K.interpreted_rope_write_attend(qkv, cos, sin, k3, v3, table, lens, n_splits=S)
    print("   writes: variant vs package", (k2 - k3).abs().max().item(), (v2 - v3).abs().max().item(),
          "package vs reference", (k3 - k1).abs().max().item(), (v3 - v1).abs().max().item())
print("chunks")
for B, S, dot, chunk in ((1, 2, True, 4), (3, 2, False, 2), (2, 1, True, 8), (3, 4, True, 2)):
    qkv = torch.randn(B, H + 2 * H_kv, D)
    angle = torch.rand(W * BS, D // 2) * 6
    cos, sin = angle.cos(), angle.sin()
    pk = torch.randn(B * W + 1, H_kv, BS, D)
    pv = torch.randn(B * W + 1, H_kv, BS, D)
    table = (torch.randperm(B * W) + 1).int().view(B, W)
    lens = torch.randint(0, W * BS - 1, (B,), dtype=torch.int32)
    lens[0] = 0
    k1, v1, k2, v2 = pk.clone(), pv.clone(), pk.clone(), pv.clone()
    want = K.reference_rope_write_attend(qkv, cos, sin, k1, v1, table, lens)
    with K.library_interpreted():
        got = V.launch(qkv, cos, sin, k2, v2, table, lens, n_splits=S, dot=dot, chunk=chunk,
                       kernel=InterpretedFunction(V.heads_kernel_body),
                       combine=InterpretedFunction(K.combine_kernel_body))
    print(B, S, dot, chunk, "vs reference", (got - want).abs().max().item(), "lens", lens.tolist())
