"""Issue 27, the attention op alone at 128 keys. In stop 54's sweep (h200_dot.json, part
launch_rule) no fixed count of splits met both 128 keys (<= 3.5 µs, wants about 4 splits of 2
blocks) and 1024 (<= 5, wants 16 or more). Here the split's size follows the row's length on
the device, with a floor: a split holds at least MIN_BLOCKS blocks (variant79.py), so 128 keys
are read by 4 programs of 2 blocks and 1024 by every split of the grid. In one process:

- 'op': the op alone (RoPE, write, attention, and its combine), and 'kernel': the fused kernel
  alone (as the step runs it up to 16 rows, its combine in the output projection), for the
  package's launch and the variant's, at 1 and 8 rows and 40 to 1024 keys, a table of 64
  blocks, lens = keys - 1; a graph of 20 calls, a replay launched before the timed one, the
  median of 30 replays, 3 rounds interleaved (lab.pages.attention_times's timing).
- 'checks': each form's largest error against the reference (float32), against the package's
  output, and a replay of a graph of one call against its eager call (bitwise).
- 'steps': the paged fused step (pages.replayed, compile=True) at 1 and 8 rows with the
  package's kernel and the variant's (min 2 blocks), the package's splits, in turns, 5 rounds,
  48 steps with an event every 16 at positions 36-83 and 964-1011; greedy tokens over 64
  steps against the package's.
"""

import json
import statistics
import sys
import time

import torch

sys.path.insert(0, "proto79")
from variant79 import adaptive_kernel  # noqa: E402

from tinyllm import kernels as K, load_pretrained  # noqa: E402
from tinyllm.lab import bench, pages  # noqa: E402
from tinyllm.lab.prompts import prompt_batch  # noqa: E402
from tinyllm.lab.timing import step_times  # noqa: E402

out_path = sys.argv[1]
t_start = time.time()
res = {"provenance": bench.provenance("python3 proto79/probe79.py OUT.json"), "op_alone_us": {},
       "checks": {}, "steps": {}}
package_launch = K.triton_rope_write_attend


def variant_launch(qkv, cos, sin, k_cache, v_cache, block_table, lens, kernels=None,
                   n_splits=None, num_warps=None, splits=False, *, min_blocks=2, warps=2,
                   dot=True, S=None):
    B, _, D = qkv.shape
    _, H_kv, block_size, _ = k_cache.shape
    H = qkv.shape[1] - 2 * H_kv
    n_splits = S or K.split_count(B, H_kv, qkv.device)
    G = H // H_kv
    most = max(-(-block_table.shape[1] // n_splits), min_blocks)
    chunk, stages = (1 << (most - 1).bit_length(), 1) if most <= K.WHOLE_SPLIT else (2, 3)
    out = torch.empty(B, H, D, dtype=qkv.dtype, device=qkv.device)
    part = torch.empty(B, H, n_splits, D, dtype=torch.float32, device=qkv.device)
    m = torch.empty(B, H, n_splits, dtype=torch.float32, device=qkv.device)
    w = torch.empty_like(m)
    adaptive_kernel[(B, H_kv, n_splits)](
        qkv, cos, sin, k_cache, v_cache, block_table, lens, out, part, m, w, D**-0.5,
        qkv.stride(0), qkv.stride(1), cos.stride(0), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), block_table.stride(0), lens.stride(0), out.stride(0), out.stride(1),
        part.stride(0), part.stride(1), part.stride(2), m.stride(0), m.stride(1),
        H=H, G=G, G_PAD=max(16 if dot else 2, 1 << (G - 1).bit_length()), D=D, BLOCK=block_size,
        N_SPLITS=n_splits, PARTIALS=True, DOT=dot, CHUNK=chunk, STAGES=stages,
        num_warps=warps, MIN_BLOCKS=min_blocks, **K.pdl_launch(qkv.device),
    )
    if splits:
        return part, m, w
    return K.launch_combine(part, m, w, out)


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
        graph.replay()
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return round(statistics.median(times), 3)


H, H_kv, D, width = 8, 4, 32, 64
dev, dt = "cuda", torch.bfloat16
gen = torch.Generator(device=dev).manual_seed(0)
angle = torch.rand(1024, D // 2, device=dev, generator=gen)
cos, sin = angle.cos().to(dt), angle.sin().to(dt)

FORMS = {1: [("package", {}),
             ("S64 min2 w2", dict(S=64, min_blocks=2, warps=2)),
             ("S64 min2 w4", dict(S=64, min_blocks=2, warps=4)),
             ("S64 min2 sums w2", dict(S=64, min_blocks=2, warps=2, dot=False)),
             ("S64 min4 w2", dict(S=64, min_blocks=4, warps=2)),
             ("S32 min2 w2", dict(S=32, min_blocks=2, warps=2)),
             ("S32 min2 w4", dict(S=32, min_blocks=2, warps=4)),
             ("S16 min2 w2", dict(S=16, min_blocks=2, warps=2)),
             ("S16 min2 w4", dict(S=16, min_blocks=2, warps=4))],
         8: [("package", {}),
             ("S16 min2 w1", dict(S=16, min_blocks=2, warps=1)),
             ("S16 min2 w2", dict(S=16, min_blocks=2, warps=2)),
             ("S16 min2 w4", dict(S=16, min_blocks=2, warps=4)),
             ("S16 min4 w2", dict(S=16, min_blocks=4, warps=2)),
             ("S32 min2 w1", dict(S=32, min_blocks=2, warps=1)),
             ("S32 min2 w2", dict(S=32, min_blocks=2, warps=2)),
             ("S16 min2 sums w2", dict(S=16, min_blocks=2, warps=2, dot=False))]}


def launcher(kw, kernel_only):
    if not kw:
        return lambda *a: package_launch(*a, splits=kernel_only)
    return lambda *a: variant_launch(*a, splits=kernel_only, **kw)


for B in (2, 4, 16, 32):  # the package's splits at other batches: the floor alone
    FORMS[B] = [("package", {}), ("min2 w2", dict(min_blocks=2, warps=2))]
for B in (1, 8, 2, 4, 16, 32):
    for n in ((40, 128, 256, 512, 1024) if B in (1, 8) else (128, 1024)):
        qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
        pool = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
        vpool = torch.randn_like(pool)
        table = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
        lens = torch.full((B,), n - 1, device=dev, dtype=torch.int32)
        args = (qkv, cos, sin, pool, vpool, table, lens)
        ref = K.reference_rope_write_attend(qkv.float(), cos.float(), sin.float(), pool.float(),
                                            vpool.float(), table, lens)
        case = f"batch {B}, {n} keys"
        got = {}
        checks = {}
        package_out = package_launch(*args).float()
        for name, kw in FORMS[B]:
            out = launcher(kw, False)(*args)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                replay_out = launcher(kw, False)(*args)
            g.replay()
            torch.cuda.synchronize()
            checks[name] = {"max_err_vs_ref": float((out.float() - ref).abs().max()),
                            "max_diff_vs_package": float((out.float() - package_out).abs().max()),
                            "replay_equal_eager": bool(torch.equal(replay_out, out))}
            got[name] = {"op": [], "kernel": []}
        for _ in range(3):
            for name, kw in FORMS[B]:
                got[name]["op"].append(per_call(lambda: launcher(kw, False)(*args)))
                got[name]["kernel"].append(per_call(lambda: launcher(kw, True)(*args)))
        res["op_alone_us"][case] = {
            name: {part: {"rounds": r, "median": statistics.median(r)} for part, r in g.items()}
            for name, g in got.items()}
        res["checks"][case] = checks
        print(case, {name: (statistics.median(g["op"]), statistics.median(g["kernel"]))
                     for name, g in got.items()}, flush=True)
        bad = {k: c for k, c in checks.items() if c["max_err_vs_ref"] > 0.02 or not c["replay_equal_eager"]}
        if bad:
            print("  CHECK FAILED", bad, flush=True)
json.dump(res, open(out_path, "w"), indent=1)
print(f"op sweep done in {time.time() - t_start:.0f} s", flush=True)

# --- the step, the package's splits, the variant's floor of 2 blocks a split -------------------
if len(sys.argv) > 2 and sys.argv[2] == "--no-steps":
    sys.exit(0)
rule = {"kw": None}


def step_launch(*args, **kwargs):
    if rule["kw"] is None:
        return package_launch(*args, **kwargs)
    kwargs.pop("num_warps", None)
    return variant_launch(*args, **kwargs, **rule["kw"])


K.triton_rope_write_attend = step_launch
model = load_pretrained("cuda")
STEP_FORMS = {1: {"package": None, "min2 w2": dict(min_blocks=2, warps=2)},
              8: {"package": None, "min2 w2": dict(min_blocks=2, warps=2)}}


def timed(v):
    v.reset()
    short = statistics.median(step_times(v.step, v.tok, 48, 4, 16))
    for _ in range(880):
        v.step(v.tok)
    return round(short, 2), round(statistics.median(step_times(v.step, v.tok, 48, 0, 16)), 2)


for B in (1, 8):
    vs = {}
    for name, kw in STEP_FORMS[B].items():
        rule["kw"] = kw
        vs[name] = pages.replayed(model, prompt_batch(B, 32, "cuda"), f"batch {B}, {name}",
                                  kv="paged", compile=True, room=992)
    rule["kw"] = None
    toks = {}
    for name, v in vs.items():
        v.reset()
        tok, seq = v.tok, []
        for _ in range(64):
            out = v.step(tok)
            tok = (out[0] if isinstance(out, tuple) else out).reshape(B, -1).argmax(-1, keepdim=True)
            seq.append(tok.clone())
        toks[name] = torch.cat(seq, 1)
    agree = float((toks["package"] == toks["min2 w2"]).float().mean())
    got = {name: {"short": [], "long": []} for name in vs}
    for v in vs.values():
        timed(v)
    for _ in range(5):
        for name, v in vs.items():
            s, l = timed(v)
            got[name]["short"].append(s)
            got[name]["long"].append(l)
    res["steps"][str(B)] = {
        name: {"positions 36-83": g["short"], "positions 964-1011": g["long"],
               "short_us": statistics.median(g["short"]), "long_us": statistics.median(g["long"])}
        for name, g in got.items()}
    res["steps"][str(B)]["greedy_share_equal_64_steps"] = agree
    print(f"step batch {B}:", {n: (statistics.median(g['short']), statistics.median(g['long']))
                               for n, g in got.items()}, "greedy agree", agree, flush=True)
    json.dump(res, open(out_path, "w"), indent=1)

res["seconds"] = round(time.time() - t_start, 1)
json.dump(res, open(out_path, "w"), indent=1)
print("done", res["seconds"], flush=True)
