"""Where the paged engine's host time goes on this machine: each section's µs per step
(perf_counter wrappers) in a warm run, a cProfile of a warm run, and the cost of single CUDA
calls the step issues."""
import collections, cProfile, io, json, pstats, sys, time
import numpy as np, torch
from tinyllm import load_pretrained
from tinyllm.serve import PagedEngine
from tinyllm.rows import Rows, to_device
from tinyllm.lab import engine_time

n = int(sys.argv[1])
model = load_pretrained("cuda")
acc = collections.Counter()
def wrap(cls, name):
    f = getattr(cls, name)
    def g(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc[name] += time.perf_counter() - t; return r
    setattr(cls, name, g)
prompts, news = engine_time.workload(max(64, 8 * n))
e = PagedEngine(model, n, max_len=512, overlap=True)
e.capture()
engine_time.serve(e, prompts, news)
t0 = time.perf_counter(); done, s = engine_time.serve(e, prompts, news)
host = sorted(engine_time.host_per_step(e, t0))
S = len([x for x in e.stats if x["t0"] >= t0])
print(f"rows {n} plain: tok/s {sum(news)/s:.0f} host median {host[len(host)//2]*1e6:.0f} µs steps {S}")
if n == 256:
    pr = cProfile.Profile(); pr.enable(); engine_time.serve(e, prompts, news); pr.disable()
    sio = io.StringIO(); pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(35); print(sio.getvalue()[:9000])
for name in ["hand_out", "release", "prefill_replayed", "admit", "step", "send_to_host", "replay", "transaction"]:
    wrap(PagedEngine, name)
for name in ["flush", "grow", "move", "compaction", "snapshot", "take", "settle", "rows_of"]:
    wrap(Rows, name)
acc.clear()
t0 = time.perf_counter(); done, s = engine_time.serve(e, prompts, news)
S = len([x for x in e.stats if x["t0"] >= t0])
print(f"rows {n} wrapped: tok/s {sum(news)/s:.0f} wall/step {s/S*1e6:.0f} µs, admissions {len(e.admissions)}")
for k, v in acc.most_common():
    print(f"   {k:18s} {v/S*1e6:7.1f} µs/step")
if n == 256:
    def tm(f, k=2000):
        f(); torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(k): f()
        el = (time.perf_counter() - t) / k * 1e6; torch.cuda.synchronize(); return round(el, 2)
    x = np.arange(300, dtype=np.int64); d = torch.zeros(300, dtype=torch.long, device="cuda")
    pinned = torch.zeros(300, dtype=torch.long).pin_memory()
    ids = torch.zeros(256, dtype=torch.long, device="cuda")
    ev = torch.cuda.Event()
    r = e.rows
    print(json.dumps({
        "to_device(300)": tm(lambda: to_device(x, "cuda")),
        "as_tensor": tm(lambda: torch.as_tensor(x)),
        "pin_memory": tm(lambda: torch.as_tensor(x).pin_memory()),
        "pinned.copy_(from_numpy)+to": tm(lambda: (pinned.numpy().__setitem__(slice(None), x), pinned.to("cuda", non_blocking=True))),
        "d.copy_(pinned, nb)": tm(lambda: d.copy_(pinned, non_blocking=True)),
        "ids.to(cpu, nb)": tm(lambda: ids.to("cpu", non_blocking=True, copy=True)),
        "Event()+record": tm(lambda: torch.cuda.Event().record()),
        "ev.record": tm(lambda: ev.record()),
        "tok.clone": tm(lambda: r.tok.clone()),
        "index_copy_": tm(lambda: r.state.index_copy_(0, d[:4], r.state[4:8].clone())),
        "decode replay 256": tm(lambda: e.decode_graphs.replay(256), 200),
        "snapshot": tm(r.snapshot),
        "host.copy": tm(r.host.copy),
    }))
