"""Device call A (issue 27): the one-kernel sampler against the reference's ops, on the H200.
1. ids: the kernel against reference_sample on the same inputs, many rows, share equal.
2. a graph of the sampler alone, each way, at 1-256 rows: kernels a replay, µs a replay.
3. the paged engine (engine_time.scale) with each sampler, same process: tok/s, the decode step
   replayed alone, the GPU's µs a step and a prefill."""
import json, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
import tinyllm.serve
from tinyllm import load_pretrained
from tinyllm.generation import reference_sample, sample
from tinyllm.lab import engine_time
from tinyllm.lab.floor import best_replay_us

out = {"commit": open(".final/COMMIT").read().strip(), "torch": torch.__version__,
       "gpu": torch.cuda.get_device_name()}
V = 258


def case(B, g, dtype=torch.bfloat16):
    logits = (torch.randn(B, V, device="cuda", generator=g) * 3).to(dtype)
    t = torch.rand(B, device="cuda", generator=g, dtype=torch.float64) * 2
    t[::4] = 0.0
    top_k = torch.randint(0, 300, (B,), device="cuda", generator=g)
    top_k[::2] = 0
    seed = torch.randint(0, 2**62, (B,), device="cuda", generator=g)
    position = torch.randint(0, 1024, (B,), device="cuda", generator=g)
    return logits, t, top_k, seed, position


g = torch.Generator(device="cuda").manual_seed(0)
equal = total = 0
for dtype in (torch.bfloat16, torch.float32):
    for _ in range(50):
        c = case(4096, g, dtype)
        equal += int((sample(*c) == reference_sample(*c)).sum())
        total += 4096
out["ids"] = {"equal": equal, "total": total}
print("ids", out["ids"], flush=True)


def kernels_in(graph):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA" and "Memcpy" not in e.name
               and "Memset" not in e.name)


out["graph"] = {}
for B in (1, 8, 32, 64, 128, 256):
    c = case(B, g)
    row = {}
    for name, fn in (("reference", reference_sample), ("kernel", sample)):
        for _ in range(3):
            fn(*c)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ids = fn(*c)
        graph.replay(); torch.cuda.synchronize()
        row[name] = {"us": round(best_replay_us(graph, 200, 5), 2), "kernels": kernels_in(graph)}
    out["graph"][B] = row
    print("graph", B, row, flush=True)

model = load_pretrained("cuda")
out["engine"] = {}
for n_rows in (1, 8, 64, 256):
    for name, fn in (("kernel", sample), ("reference", reference_sample)):
        tinyllm.serve.sample = fn  # the engine's decode and prefill graphs sample with fn
        r = engine_time.scale(model, n_rows, n_requests=max(8, 4 * n_rows))
        tinyllm.serve.sample = sample
        keep = ("tok_s", "replay_alone_us", "gpu_us_per_step", "gpu_us_per_fill",
                "host_us_per_step", "capture_s", "tokens_identical_across_runs")
        out["engine"].setdefault(n_rows, {})[name] = {k: r[k] for k in keep}
        print("engine", n_rows, name, out["engine"][n_rows][name], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("wrote", sys.argv[1])

from tinyllm import PagedEngine
out["engine_kernels"] = {}
for name, fn in (("kernel", sample), ("reference", reference_sample)):
    tinyllm.serve.sample = fn
    engine = PagedEngine(model, 256, max_len=512)
    engine.capture()
    tinyllm.serve.sample = sample
    for key in (1, 8, 64, 256):
        snapshot = engine.cache.snapshot()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            engine.decode_graphs.replay(key)
            torch.cuda.synchronize()
        engine.cache.restore(snapshot)
        n = sum(1 for e in prof.events() if e.device_type.name == "CUDA"
                and "Memcpy" not in e.name and "Memset" not in e.name)
        out["engine_kernels"].setdefault(key, {})[name] = n
    del engine
    torch.cuda.empty_cache()
print("engine kernels", out["engine_kernels"])
json.dump(out, open(sys.argv[1], "w"), indent=1)
print("wrote", sys.argv[1])
