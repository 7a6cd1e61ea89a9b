"""Issue 27, stop 41, call B: the paged step's attention with more shares a row, and with its
loop over blocks software-pipelined (kernels.LOOP_STAGES: Triton's tl.range num_stages), each
against the package's settings (16 shares at batch 1 and 8, the plain loop), in one process:
the op against its reference; the op alone at 128 and 1024 keys; the fused step replayed
alone on an ideal host at batch 1 and 8, the variants interleaved; the step against position;
replay against eager; greedy tokens against the package's settings. Into OUT.json."""

import collections
import json
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe44.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)
model = load_pretrained("cuda")
SPLIT_COUNT = kernels.split_count
VARIANTS = {  # name: (shares a row at every batch, or None: split_count's; loop stages)
    "16 shares (the package)": (None, 1),
    "16 shares, 2 stages": (None, 2),
    "16 shares, 3 stages": (None, 3),
    "32 shares, 2 stages": (32, 2),
    "64 shares": (64, 1),
}


def setting(name):
    splits, stages = VARIANTS[name]
    kernels.LOOP_STAGES = stages
    kernels.split_count = SPLIT_COUNT if splits is None else (lambda B, H_kv, device: splits)
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


# 1) the op against its reference, and alone at 128 and 1024 keys
g = torch.Generator(device="cuda").manual_seed(0)
H, H_kv, D, bs = 8, 4, 32, 16
for name in list(VARIANTS):
  try:
      setting(name)
      worst = 0.0
      for B in (1, 8, 40):
          lens = torch.randint(0, 1023, (B,), device="cuda", generator=g, dtype=torch.int32)
          lens[0] = 1000
          pool_k = torch.randn(B * 64 + 1, H_kv, bs, D, device="cuda", generator=g).bfloat16()
          pool_v = torch.randn(B * 64 + 1, H_kv, bs, D, device="cuda", generator=g).bfloat16()
          table = (torch.randperm(B * 64, device="cuda", generator=g) + 1).int().view(B, 64)
          qkv = torch.randn(B, H + 2 * H_kv, D, device="cuda", generator=g).bfloat16()
          angle = torch.rand(1024, D // 2, device="cuda", generator=g) * 6
          cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
          rk, rv = pool_k.clone(), pool_v.clone()
          want = kernels.reference_rope_write_attend(qkv, cos, sin, rk, rv, table, lens)
          got = kernels.rope_write_attend(qkv, cos, sin, pool_k, pool_v, table, lens)
          worst = max(worst, (got.float() - want.float()).abs().max().item())
      res.setdefault("checks_bf16_max_abs_diff", {})[name] = worst
      res.setdefault("attention", {})[name] = pages.attention_times(lengths=(128, 1024), cfg=model.cfg)
      a = res["attention"][name]
      print(f"{name:28s} worst {worst:.4f}  fused op alone b1 {a['1']['fused_op_us']} b8 {a['8']['fused_op_us']}", flush=True)
      save()
  except Exception:  # noqa: BLE001
    res[f"error {name}"] = traceback.format_exc()[-2500:]
    print(res[f"error {name}"], flush=True)
    del VARIANTS[name]

# 2) the fused step at batch 1 and 8, the variants interleaved
for batch in (1, 8):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in VARIANTS:
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

# 3) the step against position; 4) replay against eager; 5) tokens against the package's
n = model.cfg.max_seq_len - 32
base = {}
for name in VARIANTS:
    setting(name)
    for batch in (1, 8):
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
        res.setdefault("greedy_vs_package", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    print("exact", name, res["exactness"][name] if isinstance(res["exactness"][name], str) else res["exactness"][name]["all_equal"],
          {k: v["share_equal"] for k, v in res["greedy_vs_package"].items() if k.startswith(name)}, flush=True)
    save()
setting("16 shares (the package)")
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
