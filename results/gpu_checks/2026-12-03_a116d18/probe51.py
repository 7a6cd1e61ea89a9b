"""Issue 27, call I: the fused kernel reading its share's length, blocks and old keys before
PDL's wait, its blocks CHUNK at a time, the new key added from registers (no barrier),
against the kernel before (1526062), in one process: the op on CUDA against its reference and
the kernel before; the op alone (with its combine) at 128 and 1024 keys, batch 1 to 256; the
paged fused step replayed alone on an ideal host at batch 1, 8 and 256, the variants
interleaved (medians of 5); the step against position at batch 1 and 8; replay against eager;
greedy tokens against the kernel before. Into OUT.json."""

import collections
import functools
import importlib.util
import json
import statistics
import sys
import time
import traceback

import torch

from tinyllm import GraphDecoder, kernels, load_pretrained
from tinyllm.lab import bench, pages, peers
from tinyllm.lab.prompts import prompt_batch

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe51.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)


def load_before():
    """tinyllm/kernels.py at 1526062 as a module of its own, its op registrations made no-ops
    (two registrations of one op name would clash)."""
    class Op:
        def __init__(self, fn):
            self.fn = fn
        def __call__(self, *a, **k):
            return self.fn(*a, **k)
        def register_kernel(self, *a, **k):
            return lambda f: f
        def register_fake(self, f):
            return f
    real = torch.library.custom_op
    torch.library.custom_op = lambda *a, **k: (lambda fn: Op(fn))
    try:
        spec = importlib.util.spec_from_file_location("kernels_before", ".final/kernels_1526062.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        torch.library.custom_op = real
    return mod


before = load_before()
NEW = kernels.triton_rope_write_attend
VARIANTS = {  # name: (launcher, CHUNK)
    "before (1526062)": (before.triton_rope_write_attend, 4),
    "new, 2 warps": (functools.partial(NEW, num_warps=2), 4),
    "new, 4 warps": (functools.partial(NEW, num_warps=4), 4),
    "new, 2 warps, chunk 2": (functools.partial(NEW, num_warps=2), 2),
}
STEP = {1: list(VARIANTS)[:3], 8: list(VARIANTS), 256: list(VARIANTS)[:3]}
SWEPT = ["before (1526062)", "new, 2 warps", "new, 4 warps"]


def setting(name):
    kernels.triton_rope_write_attend, kernels.CHUNK = VARIANTS[name]
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


H, H_kv, D, bs = 8, 4, 32, 16
dev, dt = "cuda", torch.bfloat16

# 1) the op against its reference and the kernel before
try:
    g = torch.Generator(device=dev).manual_seed(0)
    checks = {}
    for B in (1, 8, 64, 256):
        lens = torch.randint(0, 1023, (B,), device=dev, generator=g, dtype=torch.int32)
        lens[0] = 1000
        if B > 1:
            lens[1] = 0
        pool_k = torch.randn(B * 64 + 1, H_kv, bs, D, device=dev, generator=g).to(dt)
        pool_v = torch.randn(B * 64 + 1, H_kv, bs, D, device=dev, generator=g).to(dt)
        table = (torch.randperm(B * 64, device=dev, generator=g) + 1).int().view(B, 64)
        qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, generator=g).to(dt)
        angle = torch.rand(1024, D // 2, device=dev, generator=g) * 6
        cos, sin = angle.cos().to(dt), angle.sin().to(dt)
        kr, vr = pool_k.clone(), pool_v.clone()
        ref = kernels.reference_rope_write_attend(qkv, cos, sin, kr, vr, table, lens).float()
        row = {}
        outs = {}
        for name, (fn, chunk) in VARIANTS.items():
            kernels.CHUNK = chunk
            k1, v1 = pool_k.clone(), pool_v.clone()
            y = fn(qkv, cos, sin, k1, v1, table, lens).float()
            outs[name] = (y, k1, v1)
            row[name] = {"vs_reference": (y - ref).abs().max().item(),
                         "k_vs_reference": (k1.float() - kr.float()).abs().max().item(),
                         "v_equal_reference": bool(torch.equal(v1, vr))}
            if name != "before (1526062)":
                yb, kb, vb = outs["before (1526062)"]
                row[name].update(vs_before=(y - yb).abs().max().item(),
                                 writes_equal_before=bool(torch.equal(k1, kb) and torch.equal(v1, vb)))
        kernels.CHUNK = 4
        part, m, w = NEW(qkv, cos, sin, pool_k.clone(), pool_v.clone(), table, lens, shares=True)
        row["shares, combined"] = {"shares": part.shape[2],
                                   "vs_reference": (kernels.reference_combine(part, m, w).float() - ref).abs().max().item()}
        row["ref_max"] = ref.abs().max().item()
        checks[f"batch {B}"] = row
        print("op checks", B, json.dumps(row), flush=True)
    res["op_checks_bf16"] = checks
except Exception:  # noqa: BLE001
    res["error op checks"] = traceback.format_exc()[-2500:]
    print(res["error op checks"], flush=True)
save()


# 2) the op alone, as pages.attention_times times it: a graph of 20 calls, median of 30 replays
def per_call(fn, calls=20, repeats=30) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return round(statistics.median(times), 2)


try:
    gen = torch.Generator(device=dev).manual_seed(0)
    alone = {}
    for B in (1, 8, 64, 256):
        for n in (128, 1024):
            blocks = -(-n // 16)
            pool = torch.randn(B * blocks + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            table = (torch.arange(B * blocks, device=dev, dtype=torch.int32) + 1).view(B, blocks)
            lens = torch.full((B,), n, device=dev, dtype=torch.int32)
            qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
            angle = torch.rand(n, D // 2, device=dev, generator=gen)
            args = (qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens - 1)
            got = collections.defaultdict(list)
            for _ in range(3):  # rounds, the variants interleaved
                for name, (fn, chunk) in VARIANTS.items():
                    kernels.CHUNK = chunk
                    got[name].append(per_call(functools.partial(fn, *args)))
            alone[f"batch {B}, {n} keys"] = {k: {"rounds": v, "median": statistics.median(v)} for k, v in got.items()}
            print("alone", B, n, {k: statistics.median(v) for k, v in got.items()}, flush=True)
    kernels.CHUNK = 4
    res["op_alone_us"] = alone
except Exception:  # noqa: BLE001
    res["error op alone"] = traceback.format_exc()[-2500:]
    print(res["error op alone"], flush=True)
save()

# 3) the paged fused step, the variants interleaved
model = load_pretrained("cuda")
for batch, chosen in STEP.items():
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in chosen:
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
    del built

# 4) the step against position; 5) replay against eager; 6) tokens against the kernel before
n = model.cfg.max_seq_len - 32
base = {}
for name in SWEPT:
    setting(name)
    for batch in (1, 8):
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"sweep {name} {batch}")
            continue
        v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), name, kv="paged", compile=True, room=n)
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault(f"sweep_{batch}", {})[name] = sweep
        print("sweep", batch, f"{name:28s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        save()
    for batch in (1, 8):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        if batch not in base:
            base[batch] = toks
        same = toks == base[batch]
        res.setdefault("greedy_vs_before", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    if name != SWEPT[0] and time.time() - t_start < budget:
        try:
            res.setdefault("exactness", {})[name] = pages.paged_exactness(model)
        except Exception:  # noqa: BLE001
            res.setdefault("exactness", {})[name] = traceback.format_exc()[-2500:]
        e = res["exactness"][name]
        print("exact", name, e if isinstance(e, str) else (e["all_equal"], e["steps"]), flush=True)
    print("tokens", name, {k: v["share_equal"] for k, v in res["greedy_vs_before"].items() if k.startswith(name)}, flush=True)
    save()
setting("new, 2 warps")
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
