"""Issue 27, stop 42, call F: the paged step with the attention's combine folded into the
output projection, its shares read at once (no mask on the max read first) (projections.combine_project_add: one kernel at one row, 4 fewer a step)
against the step before (rope_write_attend, its combine kernel, then project_add), in one
process: the op on CUDA against its reference; the fused step replayed alone on an ideal host
at batch 1, 2 and 8, the variants interleaved (medians of 5); the step against position at
batch 1 and 8; replay against eager; greedy tokens against the step before. Into OUT.json."""

import collections
import json
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained, projections
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch
from tinyllm.model import Block
from tinyllm.projections import norm_project, norm_swiglu, project_add
from torch._subclasses.fake_tensor import FakeTensorMode

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe48.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)
model = load_pretrained("cuda")
SPLIT_COUNT, FOLDED = kernels.split_count, Block.decode


def decode_before(self, x, cos, sin, kv):
    """Block.decode at 16e1d28: the attention's output from rope_write_attend (and its
    combine kernel), then project_add."""
    a, B = self.attn, x.shape[0]
    x = x.view(B, -1)
    qkv = norm_project(x, self.attn_norm.weight, a.wqkv.weight, self.attn_norm.eps)
    qkv = qkv.view(B, a.n_heads + 2 * a.n_kv_heads, a.head_dim)
    y = kv.rope_write_attend(qkv, cos, sin, a.n_kv_heads)
    x = project_add(y.view(B, -1), a.wo.weight, x)
    h = norm_swiglu(x, self.ffn_norm.weight, self.ffn.w13.weight, self.ffn_norm.eps)
    return project_add(h, self.ffn.w2.weight, x).view(B, 1, -1)


VARIANTS = {  # name: (decode, one row's outputs a program and warps)
    "combine kernel (before)": (decode_before, 16, 4),
    "folded, one row 16 outputs 4 warps": (FOLDED, 16, 4),
    "folded, one row 8 outputs 1 warp (the package)": (FOLDED, 8, 1),
    "folded, one row 4 outputs 1 warp": (FOLDED, 4, 1),
    "folded, one row 8 outputs 2 warps": (FOLDED, 8, 2),
    "before, one row 8 outputs 1 warp": (decode_before, 8, 1),
}
SWEPT = ["combine kernel (before)", "folded, one row 8 outputs 1 warp (the package)",
         "folded, one row 4 outputs 1 warp"]


def setting(name):
    decode, block_n, warps = VARIANTS[name]
    Block.decode, projections.ROW_BLOCK_N, projections.ROW_WARPS = decode, block_n, warps
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


# 1) the ops against their references
try:
    g = torch.Generator(device="cuda").manual_seed(0)
    H, H_kv, D, bs = 8, 4, 32, 16
    worst = {}
    for B in (1, 8):
        lens = torch.randint(0, 1023, (B,), device="cuda", generator=g, dtype=torch.int32)
        lens[0] = 1000
        pool_k = torch.randn(B * 64 + 1, H_kv, bs, D, device="cuda", generator=g).bfloat16()
        pool_v = torch.randn(B * 64 + 1, H_kv, bs, D, device="cuda", generator=g).bfloat16()
        table = (torch.randperm(B * 64, device="cuda", generator=g) + 1).int().view(B, 64)
        qkv = torch.randn(B, H + 2 * H_kv, D, device="cuda", generator=g).bfloat16()
        angle = torch.rand(1024, D // 2, device="cuda", generator=g) * 6
        cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
        w = (torch.randn(256, 256, device="cuda", generator=g) * 0.05).bfloat16()
        res_x = torch.randn(B, 256, device="cuda", generator=g).bfloat16()
        k1, v1, k2, v2 = pool_k.clone(), pool_v.clone(), pool_k.clone(), pool_v.clone()
        y = kernels.rope_write_attend(qkv, cos, sin, k1, v1, table, lens)
        shares = kernels.rope_write_shares(qkv, cos, sin, k2, v2, table, lens)
        got = projections.combine_project_add(*shares, w, res_x)
        want = projections.project_add(y.view(B, -1), w, res_x)
        ref = projections.reference_combine_project_add(*shares, w, res_x)
        worst[f"batch {B}"] = {
            "shares": shares[0].shape[2],
            "same_writes": bool(torch.equal(k1, k2) and torch.equal(v1, v2)),
            "vs_combine_kernel_then_project_add": (got.float() - want.float()).abs().max().item(),
            "vs_reference": (got.float() - ref.float()).abs().max().item(),
            "ref_max": ref.abs().max().item()}
    res["op_checks_bf16"] = worst
    print("op checks", worst, flush=True)
except Exception:  # noqa: BLE001
    res["error op checks"] = traceback.format_exc()[-2500:]
    print(res["error op checks"], flush=True)
save()

# 2) the fused step at batch 1 and 8, the variants interleaved (at 8, one row's settings
# do not run: the step before and the package only)
for batch in (1, 8):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in VARIANTS if batch == 1 else SWEPT[:2]:
        setting(name)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print(batch, f"{r['name']:28s}", r["step_us"]["median"], "us", r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()

# 3) the step against position; 4) replay against eager; 5) tokens against the step before
n = model.cfg.max_seq_len - 32
base = {}
for name in SWEPT:
    setting(name)
    for batch in ((1, 8) if name != SWEPT[2] else (1,)):
        v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), name, kv="paged", compile=True, room=n)
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault(f"sweep_{batch}", {})[name] = sweep
        print("sweep", batch, f"{name:28s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
    save()
    if time.time() - t_start > budget:
        res.setdefault("skipped", []).append(f"exactness and tokens of {name}")
        continue
    try:
        res.setdefault("exactness", {})[name] = pages.paged_exactness(model)
    except Exception:  # noqa: BLE001
        res.setdefault("exactness", {})[name] = traceback.format_exc()[-2500:]
    for batch in (1, 8):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        if batch not in base:
            base[batch] = toks
        same = toks == base[batch]
        res.setdefault("greedy_vs_before", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    e = res["exactness"][name]
    print("exact", name, e if isinstance(e, str) else (e["all_equal"], e["steps"]),
          {k: v["share_equal"] for k, v in res["greedy_vs_before"].items() if k.startswith(name)}, flush=True)
    save()
setting("folded, one row 8 outputs 1 warp (the package)")
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
