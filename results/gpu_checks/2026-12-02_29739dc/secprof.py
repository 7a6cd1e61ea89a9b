"""H200: where PagedEngine's host time per step goes (perf_counter around each method, cumulative,
nested calls counted in their callers too), after capture() and a warm run, on the bench's
workload at n rows (8 requests a row); then the host cost of the primitives a step issues."""
import collections, functools, json, sys, time
import numpy as np, torch
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
from tinyllm import rows as R, serve as S, engine as E, graphs as G
acc = collections.defaultdict(float); cnt = collections.Counter()
def wrap(cls, name):
    f = getattr(cls, name); label = f"{cls.__name__}.{name}"
    @functools.wraps(f)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: acc[label] += time.perf_counter() - t; cnt[label] += 1
    setattr(cls, name, g)
for cls, names in [(R.Rows, ["flush","grow","advance_host","compaction","move","in_use","snapshot","release","settle","free_rows","take","admit","restore"]),
                   (R.Upload, ["__call__"]), (R.Download, ["__call__"]), (R.Host, ["copy"]),
                   (S.PagedEngine, ["hand_out","release","record","replay","step","admit","prefill_replayed","captured"]),
                   (G.Graphs, ["replay"])]:
    for nm in names: wrap(cls, nm)
n, out = int(sys.argv[1]), sys.argv[2]
model = load_pretrained("cuda")
prompts, news = engine_time.workload(max(64, 8 * n))
engine = S.PagedEngine(model, n, max_len=512, overlap=True)
engine.capture()
engine_time.serve(engine, prompts, news)
acc.clear(); cnt.clear()
t_start = time.perf_counter()
done, s = engine_time.serve(engine, prompts, news)
host = sorted(engine_time.host_per_step(engine, t_start))
steps = cnt["PagedEngine.step"]
res = {"n_rows": n, "tok_s": round(sum(news) / s, 1), "steps": steps,
       "host_us_median": round(host[len(host)//2] * 1e6, 1),
       "per_step_us": {k: round(v / steps * 1e6, 2) for k, v in sorted(acc.items(), key=lambda x: -x[1])},
       "calls_per_step": {k: round(cnt[k] / steps, 3) for k in acc}}
# primitives, µs per call, host side (n=2000 each, GPU otherwise idle)
def us(f, k=2000):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(k): f()
    dt = (time.perf_counter() - t) / k * 1e6; torch.cuda.synchronize(); return round(dt, 2)
r = engine.rows; tok = r.tok; buf = torch.empty_like(tok); ev = torch.Event(r.device)
st = r.host.state; pinned = torch.empty(st.size, dtype=torch.long, pin_memory=True); pv = pinned.numpy()
key = n
prim = {
  "tok.clone": us(lambda: tok.clone()),
  "buf.copy_(tok)": us(lambda: buf.copy_(tok)),
  "torch.Event()": us(lambda: torch.Event(r.device)),
  "event.record": us(lambda: ev.record()),
  "event.record+sync": us(lambda: (ev.record(), ev.synchronize())),
  "host.state.copy()": us(lambda: st.copy()),
  "Host.copy()": us(lambda: r.host.copy()),
  "pinned numpy write state": us(lambda: pv.__setitem__(slice(0, st.size), st.reshape(-1))),
  "flat.copy_(pinned) nb": us(lambda: r.flat.copy_(pinned, non_blocking=True)),
  "download tok[:key]": us(lambda: engine.download(r.tok[:key, 0])),
  "graph replay decode(key)": us(lambda: engine.decode_graphs.graphs[key][0].replay(), 40),
  "graph replay decode(1)": us(lambda: engine.decode_graphs.graphs[1][0].replay(), 200),
  "np.flatnonzero(active)": us(lambda: np.flatnonzero(st[:, 1])),
}
res["primitive_us"] = prim
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
