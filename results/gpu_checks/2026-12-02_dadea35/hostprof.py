"""Where PagedEngine's host time goes at 256 rows on the GPU: a warm run under cProfile
(shares, the profiler inflates Python calls), then each CUDA call the step makes, timed
alone on the host (µs a call, median of 2,000)."""
import cProfile, io, json, pstats, sys, time
import numpy as np, torch
from tinyllm import load_pretrained
from tinyllm.serve import PagedEngine
from tinyllm.rows import to_device
from tinyllm.lab.engine_time import workload, serve
n = int(sys.argv[1]); out = sys.argv[2]
model = load_pretrained("cuda")
prompts, news = workload(8 * n, 0)
e = PagedEngine(model, n, max_len=512, overlap=True)
e.capture()
serve(e, prompts, news)
t0 = time.perf_counter(); serve(e, prompts, news); t1 = time.perf_counter(); wall = t1 - t0
steps = [s for s in e.stats if t0 <= s["t0"] < t1]
adm = sorted(a["admit_s"] for a in e.admissions if t0 <= a["t0"] < t1)
n_adm = sum(a["n"] for a in e.admissions if t0 <= a["t0"] < t1)
pr = cProfile.Profile(); pr.enable(); serve(e, prompts, news); pr.disable()
s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("tottime"); st.print_stats(45)
st.sort_stats("cumtime"); st.print_stats(45)
def med(f, k=2000):
    ts = []
    for i in range(k):
        a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
        if i % 50 == 0: torch.cuda.synchronize()
    torch.cuda.synchronize(); ts.sort(); return round(ts[len(ts) // 2] * 1e6, 2)
r = e.rows
state = r.host.state.copy()
calls = {
    "rows.upload(state, all rows)": lambda: r.upload(state),
    "upload_fill(1 prompt)": lambda: e.upload_fill(np.zeros(16 + state.shape[1] + n, np.int64)),
    "download(tok[:n])": lambda: e.download(r.tok[:n, 0]),
    "torch.Event record": lambda: torch.Event(e.device).record(),
    "tok.clone()": lambda: r.tok.clone(),
    "to_device(2 x 4 ints)": lambda: to_device(np.zeros((2, 4), np.int64), e.device),
    "decode graph replay (n)": lambda: e.decode_graphs.replay(n),
    "decode graph replay (1)": lambda: e.decode_graphs.replay(1),
    "fill graph replay (1, 16)": lambda: e.fill_graphs.replay((1, 16)),
    "host.copy()": lambda: r.host.copy(),
}
snap = e.cache.snapshot()
micro = {k: med(f) for k, f in calls.items()}
e.cache.restore(snap)
steps_s = sorted(x["step_s"] - x["read_s"] for x in steps)
res = {"n_rows": n, "tok_s": round(sum(news) / wall, 1), "steps": len(steps),
       "median_step_less_read_us": round(steps_s[len(steps_s) // 2] * 1e6, 1),
       "median_launch_us": round(sorted(x["launch_s"] for x in steps)[len(steps) // 2] * 1e6, 1),
       "admitted_per_step": round(n_adm / len(steps), 2), "admission_calls": len(adm),
       "admission_us_median": round(adm[len(adm) // 2] * 1e6, 1),
       "micro_us": micro}
json.dump(res, open(out + ".json", "w"), indent=1)
open(out + ".txt", "w").write(s.getvalue())
print(json.dumps(res, indent=1))
