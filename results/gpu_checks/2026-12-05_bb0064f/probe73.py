"""Issue 27 (prepared in stop 51, with no GPU): the op alone and the paged fused step with the
attention reading before PDL's wait and triggering first (variants8, EARLY), against the same
reading with the trigger after the wait (variants5's form as it ran) and the package, in one
process. Beside every round of the op, a graph of one-number Triton kernels with PDL (the node
floor, lab.floor's "triton, PDL"), so each op can be read in nodes of the same run.

1. the node floor (lab.floor.node_floor), as notebook 11's section 1 measures it;
2. a chain on the GPU: a graph of CALLS calls of the op, call c at length base + c with its own
   qkv, so each call reads the key the call before wrote, REPLAYS replays with new qkv and the
   pools put back before each; every output and the pools against the package's eager chain;
3. the op alone: a. the package's, with each graph captured just before its timing or every
   graph captured first, with a table of 64 blocks or as wide as the keys, at 1 and 8 rows and
   128 and 1024 keys; b. every op at 1, 2, 4 and 8 rows and 40, 128 and 1024 keys (a table of
   64 blocks, lens = keys - 1), each graph captured just before its timing; a graph of 20 calls,
   median of 30 replays, 5 rounds interleaved, the node graph in every round; c. the
   package's op with its inputs placed after pads of 8 sizes, at 1 row and 128 keys and 8
   rows and 1024 keys;
4. the step replayed alone at 1, 2, 4 and 8 rows (from 9 rows up the variant is the package's
   kernel: a share is not read in one pass there), against position at 1 and 8 rows, greedy
   tokens against the package's, replay against eager."""

import collections
import functools
import json
import statistics
import subprocess
import sys
import time
import traceback

import torch

sys.path.insert(0, ".final")
import variants8 as V  # noqa: E402

from tinyllm import GraphDecoder, kernels, load_pretrained  # noqa: E402
from tinyllm.lab import bench, floor, pages, peers  # noqa: E402
from tinyllm.lab.prompts import prompt_batch  # noqa: E402

out_path, budget = sys.argv[1], float(sys.argv[2])
t_start = time.time()
res = {"provenance": bench.provenance("PYTHONPATH=. python3 .final/probe73.py " + " ".join(sys.argv[1:]))}
save = lambda: json.dump(res, open(out_path, "w"), indent=1)  # noqa: E731
H, H_kv, D, dev, dt, width, bs = 8, 4, 32, "cuda", torch.bfloat16, 64, 16
PACKAGE = V.PACKAGE
OPS = {
    "package op": PACKAGE,
    "package kernel": functools.partial(PACKAGE, shares=True),
    "pre op": functools.partial(V.attend, early=False),
    "pre+early op": functools.partial(V.attend, early=True),
    "pre+early kernel": functools.partial(V.attend, early=True, shares=True),
}
gen = torch.Generator(device=dev).manual_seed(0)


def inputs(B, n_old, width=width):
    qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
    angle = torch.rand(1024, D // 2, device=dev, generator=gen)
    pool = torch.randn(B * width + 1, H_kv, bs, D, device=dev, dtype=dt, generator=gen)
    table = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
    lens = torch.as_tensor(n_old, device=dev, dtype=torch.int32).expand(B).contiguous()
    return qkv, angle.cos().to(dt), angle.sin().to(dt), pool, pool.clone(), table, lens


def graph_of(fn, calls=20):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return g


def per_call(g, calls=20, repeats=30):
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def kernels_per_call(g, calls=20):
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        g.replay()
        torch.cuda.synchronize()
    return sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA) / calls


# 1. the node floor
res["floor"] = floor.node_floor(ks=(1, 10, 50, 100))
print("floor", {k: v for k, v in res["floor"].items() if isinstance(v, dict)}, flush=True)
save()

# 2. the chain
CALLS, REPLAYS = 8, 50
chain = {}
for B, base in ((1, 120), (2, 30), (4, 1000), (8, 60)):
    args = inputs(B, base)
    qkvs = [torch.randn(args[0].shape, device=dev, generator=gen).to(dt) for _ in range(CALLS)]
    lens = [args[6] + c for c in range(CALLS)]
    k0, v0 = args[3].clone(), args[4].clone()
    for name in ("pre op", "pre+early op"):
        fn = OPS[name]
        run = lambda: [fn(qkvs[c], *args[1:5], args[5], lens[c]) for c in range(CALLS)]  # noqa: E731
        run()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = run()
        bad = 0
        for _ in range(REPLAYS):
            for q in qkvs:
                q.copy_(torch.randn(q.shape, device=dev, generator=gen).to(dt))
            args[3].copy_(k0)
            args[4].copy_(v0)
            g.replay()
            torch.cuda.synchronize()
            kw, vw = k0.clone(), v0.clone()
            want = [PACKAGE(qkvs[c], *args[1:3], kw, vw, args[5], lens[c]) for c in range(CALLS)]
            same = all(torch.equal(o, w) for o, w in zip(outs, want))
            bad += not (same and torch.equal(args[3], kw) and torch.equal(args[4], vw))
        chain[f"batch {B}, {name}"] = {"calls": CALLS, "replays": REPLAYS, "unequal": bad}
        print("chain", B, name, "unequal", bad, "of", REPLAYS, flush=True)
        args[3].copy_(k0)
        args[4].copy_(v0)
res["chain"] = chain
save()

# 3. the op alone. Earlier runs timed it two ways: each graph captured just before its timing
# and dropped ("fresh"), or every graph captured first, then timed in rounds ("kept"); the
# fresh ones held closer together across runs. 3a times the package's op both ways, with a
# table of 64 blocks and with one as wide as the keys; 3b times every op fresh.
node = floor.nodes()["triton, PDL"]
x = torch.zeros(1, device=dev)
node(x)


def clocks() -> str:
    """The SM and memory clocks now, as nvidia-smi reads them (MHz)."""
    q = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader"]
    return subprocess.run(q, capture_output=True, text=True).stdout.strip()


def fresh(fn, calls=20):
    g = graph_of(fn, calls)
    us = per_call(g, calls)
    del g
    return round(us, 3)


methods = {}
for B, n in ((1, 128), (1, 1024), (8, 128), (8, 1024)):
    wide, narrow = inputs(B, n - 1), inputs(B, n - 1, width=-(-n // bs))
    kept = {"kept, table 64": graph_of(functools.partial(PACKAGE, *wide)),
            "kept, table keys": graph_of(functools.partial(PACKAGE, *narrow))}
    got = collections.defaultdict(list)
    for _ in range(5):
        got["node, fresh"].append(fresh(lambda: node(x), calls=40))
        got["fresh, table 64"].append(fresh(functools.partial(PACKAGE, *wide)))
        got["fresh, table keys"].append(fresh(functools.partial(PACKAGE, *narrow)))
        for name, g in kept.items():
            got[name].append(round(per_call(g), 3))
    key = f"batch {B}, {n} keys"
    methods[key] = {name: {"rounds": v, "median": statistics.median(v)} for name, v in got.items()}
    methods[key]["clocks after"] = clocks()
    print("method", key, {k: v["median"] if isinstance(v, dict) else v for k, v in methods[key].items()}, flush=True)
    res["methods"] = methods
    save()
    del kept

# 3c. where the buffers lie: the same op, its inputs allocated after a pad of another size
# each time (0 to 1 MiB, 8 sizes), each timed fresh, 3 rounds. One earlier run timed the
# package's op 0.56 µs apart in one process with a table of 64 blocks and one of 8 at one row
# and 128 keys, the same form (gpu_checks/2026-12-04_d4618d9): does the placement alone move it?
placement = {}
for B, n in ((1, 128), (8, 1024)):
    rows = []
    for k in range(8):
        pad = torch.empty(k * (1 << 17) + k * 4096, dtype=torch.uint8, device=dev)
        args = inputs(B, n - 1)
        us = [fresh(functools.partial(PACKAGE, *args)) for _ in range(3)]
        rows.append({"pad_bytes": pad.numel(), "qkv_address": args[0].data_ptr(),
                     "pool_address": args[3].data_ptr(), "us": us, "median": statistics.median(us)})
        del pad, args
    placement[f"batch {B}, {n} keys"] = rows
    print("placement", B, n, [r["median"] for r in rows], flush=True)
res["placement"] = placement
save()

times = {}
for B in (1, 2, 4, 8):
    for n in (40, 128, 1024):
        args = inputs(B, n - 1)
        key = f"batch {B}, {n} keys"
        got = collections.defaultdict(list)
        for _ in range(5):
            got["node"].append(fresh(lambda: node(x), calls=40))
            for name, fn in OPS.items():
                got[name].append(fresh(functools.partial(fn, *args)))
        times[key] = {name: {"rounds": v, "median": statistics.median(v)} for name, v in got.items()}
        for name, fn in OPS.items():
            times[key][name]["kernels_per_call"] = kernels_per_call(graph_of(functools.partial(fn, *args)))
            times[key][name]["in_nodes"] = round(times[key][name]["median"] / times[key]["node"]["median"], 3)
        print(key, {k: (v["median"], v.get("in_nodes")) for k, v in times[key].items()}, flush=True)
        res["op_alone_us"] = times
        save()

# 4. the step
model = load_pretrained("cuda")
STEPS = {"package": PACKAGE, "pre+early": OPS["pre+early op"]}


def setting(name):
    kernels.triton_rope_write_attend = STEPS[name]
    torch._dynamo.reset()


def names(trace):
    c = collections.Counter(e["name"][:90] for e in trace if e["step"] == 0)
    return sorted(c.items(), key=lambda x: -x[1])


for batch in (1, 8, 2, 4):
    if time.time() - t_start > budget:
        res.setdefault("skipped", []).append(f"step {batch}")
        continue
    idx = prompt_batch(batch, 32, "cuda")
    built = []
    for name in STEPS:
        setting(name)
        try:
            built.append(pages.replayed(model, idx, name, kv="paged", compile=True))
        except Exception:  # noqa: BLE001
            res[f"error {name} {batch}"] = traceback.format_exc()[-2500:]
            print(res[f"error {name} {batch}"], flush=True)
    rows = peers.measure(built, repeats=5, keep_trace=True)
    for r in rows:
        r["kernel_names"] = names(r.pop("trace"))
        print("step", batch, f"{r['name']:12s}", r["step_us"]["median"], "us", r["step_us"], r["kernels"], "kernels", flush=True)
    res[f"batch_{batch}"] = rows
    save()
    del built

n = model.cfg.max_seq_len - 32
for batch in (1, 8):
    for name in STEPS:
        if time.time() - t_start > budget:
            res.setdefault("skipped", []).append(f"sweep {name} {batch}")
            continue
        setting(name)
        v = pages.replayed(model, prompt_batch(batch, 32, "cuda"), name, kv="paged", compile=True, room=n)
        t = peers.position_sweep(v, n, per=16)
        sweep = {"positions": list(range(32, 32 + n, 16)), "bin_size": 16, "paged fused_us": [round(u, 1) for u in t]}
        sweep["long_over_short"] = pages.long_over_short(sweep, "paged fused")
        sweep["spans"] = pages.bin_spans(sweep)
        res.setdefault(f"sweep_{batch}", {})[name] = sweep
        print("sweep", batch, f"{name:12s}", sweep["paged fused_us"][:3], sweep["paged fused_us"][-2:], sweep["long_over_short"], flush=True)
        save()

base = {}
for name in STEPS:
    setting(name)
    for batch in (1, 8):
        toks = GraphDecoder(model, batch, kv="paged", compile=True).generate(prompt_batch(batch, 32, "cuda"), 256)
        base.setdefault(batch, toks)
        same = toks == base[batch]
        res.setdefault("greedy_vs_package", {})[f"{name}, batch {batch}"] = {
            "share_equal": round(same.float().mean().item(), 4), "rows_identical": int(same.all(1).sum()), "rows": batch}
    save()
setting("pre+early")
try:
    res["exactness"] = pages.paged_exactness(model, batches=(1, 4, 8))
except Exception:  # noqa: BLE001
    res["exactness"] = traceback.format_exc()[-2500:]
e = res["exactness"]
print("exact", e if isinstance(e, str) else (e["all_equal"], e["steps"], e.get("batches")), flush=True)
print("tokens", json.dumps(res.get("greedy_vs_package")), flush=True)
res["seconds"] = round(time.time() - t_start, 1)
save()
print("done in", res["seconds"], "s")
