"""The floor of a graph node (issue 27's first probe): graphs of K tiny kernels replayed back
to back, CUDA events around 200 replays. torch's x.add_(1) on one element, and a Triton
kernel launched with and without PDL (launch_pdl, gdc_wait/gdc_launch_dependents)."""
import json, sys
import torch, triton, triton.language as tl
out = sys.argv[1]
res = {"torch": torch.__version__, "triton": triton.__version__}

@triton.jit
def add_one(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, x + 1)

@triton.jit
def add_one_pdl(x_ptr):
    tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(x_ptr, x + 1)

def graph_of(K, body):
    x = torch.zeros(1, device="cuda")
    for _ in range(3): body(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(K): body(x)
    return g, x

def timed(g, n=200):
    for _ in range(20): g.replay()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(5):
        a.record()
        for _ in range(n): g.replay()
        b.record(); torch.cuda.synchronize()
        best.append(a.elapsed_time(b) * 1e3 / n)
    return round(min(best), 2), round(sorted(best)[2], 2)

bodies = {
    "torch add_": lambda x: x.add_(1),
    "triton": lambda x: add_one[(1,)](x),
    "triton pdl": lambda x: add_one_pdl[(1,)](x, launch_pdl=True),
}
for name, body in bodies.items():
    rows = {}
    try:
        for K in (1, 10, 50, 100, 200):
            g, x = graph_of(K, body)
            best, med = timed(g)
            torch.cuda.synchronize()
            rows[K] = {"best_us": best, "median_us": med, "x_ok": float(x.item())}
        ks = sorted(rows); 
        slope = (rows[200]["best_us"] - rows[10]["best_us"]) / 190
        rows["us_per_node_10_to_200"] = round(slope, 3)
        rows["fixed_us"] = round(rows[10]["best_us"] - 10 * slope, 2)
    except Exception as e:
        rows["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    res[name] = rows
    print(name, rows, flush=True)
json.dump(res, open(out, "w"), indent=1)
