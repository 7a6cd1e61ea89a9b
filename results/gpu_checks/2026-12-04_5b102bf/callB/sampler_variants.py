"""Device call B (issue 27): the sampler kernel with its branches (greedy rows skip the draw;
a drawn row that keeps every id skips the sort) against 4218a1b's, which runs every stage for
every row; each in a graph of 1 call and of 10 calls (µs a call, the graph's own cost shared),
at 1-256 rows, on all-greedy, drawn-every-id and drawn-top-40 rows; ids against the reference."""
import json, sys
import torch
sys.path.insert(0, ".final")
import kernels_4218a1b as old
from tinyllm import kernels
from tinyllm.generation import reference_sample
from tinyllm.lab.floor import best_replay_us

out = {"commit": open(".final/COMMIT").read().strip(), "torch": torch.__version__,
       "gpu": torch.cuda.get_device_name(), "rows": []}
V = 258
g = torch.Generator(device="cuda").manual_seed(0)


def case(B, kind):
    logits = (torch.randn(B, V, device="cuda", generator=g) * 3).to(torch.bfloat16)
    t = torch.full((B,), 0.0 if kind == "greedy" else 0.8, device="cuda", dtype=torch.float64)
    top_k = torch.full((B,), 40 if kind == "top-40" else 0, device="cuda", dtype=torch.long)
    seed = torch.randint(0, 2**62, (B,), device="cuda", generator=g)
    position = torch.randint(0, 1024, (B,), device="cuda", generator=g)
    return logits, t, top_k, seed, position


def graph_us(fn, c, calls):
    for _ in range(3):
        fn(*c)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(*c)
    graph.replay()
    torch.cuda.synchronize()
    return round(best_replay_us(graph, 100, 5) / calls, 2)


ways = {"4218a1b": lambda *c: kernels.triton_sample(*c, kernel=old.sample_kernel),
        "branches": kernels.triton_sample}
equal = total = 0
for B in (1, 8, 64, 256):
    for kind in ("greedy", "every id", "top-40"):
        c = case(B, kind)
        want = reference_sample(*c)
        row = {"B": B, "rows": kind}
        for name, fn in ways.items():
            equal += int((fn(*c) == want).sum()); total += B
            row[name] = {"graph_of_1_us": graph_us(fn, c, 1), "per_call_in_10_us": graph_us(fn, c, 10)}
        out["rows"].append(row)
        print(row, flush=True)
out["ids"] = {"equal": equal, "total": total}
print("ids", out["ids"])
json.dump(out, open(sys.argv[1], "w"), indent=1)
