"""What the GPU does with the course's attention and norms: results/h200_probe.json.

The claims the notebooks make about kernels are read here, off the profiler, not assumed:
which kernel F.scaled_dot_product_attention runs for the decode step's shapes (a boolean or
an additive mask, enable_gqa or query heads folded into the query axis), what it returns for
a fully masked row on each backend (lab.exactness.fully_masked_row), and how many kernels
one RMSNorm launches. The provenance is the bench's (commit from TINYLLM_COMMIT where the
copy has no .git).

    python tools/gpu_probe.py OUT.json
"""

import json
import sys
from functools import partial

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from tinyllm.lab.bench import provenance
from tinyllm.lab.exactness import fully_masked_row
from tinyllm.precision import ATTENTION_BACKENDS


def kernels_of(fn) -> list[str]:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name[:90] for e in prof.events() if e.device_type.name == "CUDA"]


def sdpa_cases(B=1, H=8, H_kv=4, D=32, W=128):
    dt, dev = torch.bfloat16, "cuda"
    q = torch.randn(B, H, 1, D, dtype=dt, device=dev)
    k = torch.randn(B, H_kv, W, D, dtype=dt, device=dev)
    v = torch.randn(B, H_kv, W, D, dtype=dt, device=dev)
    keep = torch.arange(W, device=dev) <= 40
    bool_mask = keep.expand(B, W)[:, None, None, :]
    add_mask = torch.zeros(B, W, dtype=dt, device=dev).masked_fill(~keep, float("-inf"))[
        :, None, None, :
    ]
    folded = q.view(B, H_kv, H // H_kv, D)
    cases = {
        "enable_gqa, bool mask": lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=bool_mask, enable_gqa=True
        ),
        "enable_gqa, additive mask": lambda: F.scaled_dot_product_attention(
            q, k, v, attn_mask=add_mask, enable_gqa=True
        ),
        "enable_gqa, no mask": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "folded heads, bool mask": lambda: F.scaled_dot_product_attention(
            folded, k, v, attn_mask=bool_mask
        ),
        "folded heads, additive mask": lambda: F.scaled_dot_product_attention(
            folded, k, v, attn_mask=add_mask
        ),
        "folded heads, no mask": lambda: F.scaled_dot_product_attention(folded, k, v),
    }
    out = {}
    for name, fn in cases.items():
        with sdpa_kernel(ATTENTION_BACKENDS):
            try:
                names = kernels_of(fn)
                out[name] = {"kernels": len(names), "names": names}
            except RuntimeError as e:
                out[name] = {"error": str(e)[:200]}
    return out


def rms_norm_cases():
    out = {}
    for dt in (torch.bfloat16, torch.float32):
        x = torch.randn(1, 1, 256, dtype=dt, device="cuda")
        norm = torch.nn.RMSNorm(256, eps=1e-5, device="cuda", dtype=dt)
        names = kernels_of(partial(norm, x))
        out[str(dt)] = {"kernels": len(names), "names": names}
    return out


if __name__ == "__main__":
    res = {
        "provenance": provenance("python tools/gpu_probe.py " + " ".join(sys.argv[1:])),
        "sdpa_decode_batch1": sdpa_cases(),
        "sdpa_decode_batch8": sdpa_cases(B=8),
        "sdpa_fully_masked_row": fully_masked_row("cuda", torch.bfloat16),
        "rms_norm": rms_norm_cases(),
    }
    for section in ("sdpa_decode_batch1", "rms_norm"):
        for k, v in res[section].items():
            print(section, k, v.get("kernels"), (v.get("names") or [v.get("error")])[:4])
    print(json.dumps(res["sdpa_fully_masked_row"], indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)
