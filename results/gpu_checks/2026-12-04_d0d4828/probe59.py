"""Issue 27, stop 45, call G: the package's fused kernel now (the last program of a row's K/V
head to finish combines its shares: one kernel, no combine kernel) against the kernel before
(tinyllm/kernels.py at 34548e5, loaded as a module of its own), in one process: the op alone
(a graph of 20 calls, median of 30 replays, 3 rounds interleaved), with its combine and as its
fused kernel alone, batch 1, 8, 32 and 256, 128 and 1024 keys, a table of 64 blocks; the paged
fused step replayed alone on an ideal host at batch 1, 8, 32, 64 and 256 (medians of 5,
interleaved; up to 16 rows the step runs the kernel alone and combines in the output
projection, as before); against position at batch 32 (both) and 8 (now); replay against
eager at batch 1, 8, 32 and 64; greedy tokens against the kernel before."""

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
res = {"provenance": bench.provenance(f"PYTHONPATH=. python3 .final/probe59.py OUT.json {budget:g}")}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)


def load_before():
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
        spec = importlib.util.spec_from_file_location("kernels_before", ".final/kernels_34548e5.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        torch.library.custom_op = real
    return mod


before = load_before()
NOW = kernels.triton_rope_write_attend
BEFORE = before.triton_rope_write_attend


def before_step(*a, **k):  # the op's call now, its count of shares done dropped
    k.pop("shares_done", None)
    return BEFORE(*a[:7], **k)


from tinyllm import model as model_module
from tinyllm.projections import combine_project_add, norm_project, norm_swiglu, project_add

NOW_DECODE = model_module.Block.decode


def old_decode(self, x, cos, sin, kv):  # 34548e5's layer: the shares at every row count
    a, B = self.attn, x.shape[0]
    x = x.view(B, -1)
    qkv = norm_project(x, self.attn_norm.weight, a.wqkv.weight, self.attn_norm.eps)
    qkv = qkv.view(B, a.n_heads + 2 * a.n_kv_heads, a.head_dim)
    shares = kv.rope_write_shares(qkv, cos, sin, a.n_kv_heads)
    x = combine_project_add(*shares, a.wo.weight, x)
    h = norm_swiglu(x, self.ffn_norm.weight, self.ffn.w13.weight, self.ffn_norm.eps)
    return project_add(h, self.ffn.w2.weight, x).view(B, 1, -1)


def attend_decode(self, x, cos, sin, kv):  # the attention's last program combines, even at one row
    a, B = self.attn, x.shape[0]
    x = x.view(B, -1)
    qkv = norm_project(x, self.attn_norm.weight, a.wqkv.weight, self.attn_norm.eps)
    qkv = qkv.view(B, a.n_heads + 2 * a.n_kv_heads, a.head_dim)
    y = kv.rope_write_attend(qkv, cos, sin, a.n_kv_heads)
    x = project_add(y.view(B, -1), a.wo.weight, x)
    h = norm_swiglu(x, self.ffn_norm.weight, self.ffn.w13.weight, self.ffn_norm.eps)
    return project_add(h, self.ffn.w2.weight, x).view(B, 1, -1)


VARIANTS = {"before (34548e5)": (before_step, old_decode), "now": (NOW, NOW_DECODE),
            "now, attend at one row": (NOW, attend_decode)}
ALL = ["before (34548e5)", "now"]


def setting(name):
    kernels.triton_rope_write_attend, model_module.Block.decode = VARIANTS[name]
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


H, H_kv, D = 8, 4, 32
dev, dt = "cuda", torch.bfloat16


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


# 1) the op alone, in the table width of the step (64 blocks), at 128 and 1024 keys
try:
    gen = torch.Generator(device=dev).manual_seed(0)
    alone = {}
    for B in (1, 8, 32, 256):
        for n in (128, 1024):
            pool = torch.randn(B * 64 + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            table = (torch.arange(B * 64, device=dev, dtype=torch.int32) + 1).view(B, 64)
            lens = torch.full((B,), n, device=dev, dtype=torch.int32)
            qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
            angle = torch.rand(1024, D // 2, device=dev, generator=gen)
            args = (qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens - 1)
            done = torch.zeros(B, H_kv, dtype=torch.int32, device=dev)
            got = collections.defaultdict(list)
            for _ in range(3):
                got["op: before (34548e5)"].append(per_call(functools.partial(BEFORE, *args)))
                got["op: now"].append(per_call(functools.partial(NOW, *args, done)))
                for name, fn in (("before (34548e5)", BEFORE), ("now", NOW)):
                    got[f"kernel: {name}"].append(per_call(functools.partial(fn, *args, shares=True)))
            assert not done.any()
            alone[f"batch {B}, {n} keys"] = {k: {"rounds": v, "median": statistics.median(v)} for k, v in got.items()}
            alone[f"batch {B}, {n} keys"]["shares"] = kernels.split_count(B, H_kv, dev)
            alone[f"batch {B}, {n} keys"]["tensor_cores"] = kernels.tensor_cores(64, kernels.split_count(B, H_kv, dev))
            print("alone", B, n, json.dumps({k: statistics.median(v) for k, v in got.items()}), flush=True)
    res["op_alone_us"] = alone
except Exception:  # noqa: BLE001
    res["error op alone"] = traceback.format_exc()[-2500:]
    print(res["error op alone"], flush=True)
save()

# 2) the paged fused step, the variants interleaved
model = load_pretrained("cuda")
for batch in (1, 8, 32, 64, 256):
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in ALL + (["now, attend at one row"] if batch == 1 else []):
        setting(name)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print("step", batch, f"{r['name']:20s}", r["step_us"]["median"], "us", r["step_us"], r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()
    del built

# 3) the step against position; 4) tokens against the kernel before; 5) replay against eager
n = model.cfg.max_seq_len - 32
for batch, names_ in ((32, ALL), (8, ["now"])):
    for name in names_:
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"sweep {name} {batch}")
            continue
        setting(name)
        v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), name, kv="paged", compile=True, room=n)
        times = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16,
                 "paged fused_us": [round(t, 1) for t in times]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault(f"sweep_{batch}", {})[name] = sweep
        print("sweep", batch, f"{name:20s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        save()
base = {}
for name in ALL:
    setting(name)
    for batch in (1, 8, 32):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        if batch not in base:
            base[batch] = toks
        same = toks == base[batch]
        res.setdefault("greedy_vs_before", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    save()
setting("now")
try:
    res["exactness"] = pages.paged_exactness(model, batches=(1, 8, 32, 64))
except Exception:  # noqa: BLE001
    res["exactness"] = traceback.format_exc()[-2500:]
e = res["exactness"]
print("exact", e if isinstance(e, str) else (e["all_equal"], e["steps"], e.get("batches")), flush=True)
print("tokens", json.dumps(res.get("greedy_vs_before")), flush=True)
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
