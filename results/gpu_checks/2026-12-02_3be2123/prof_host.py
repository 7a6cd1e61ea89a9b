"""Where the paged engine's host time goes at N rows, on the GPU machine. argv: mode N.
modes: plain (engine_time.scale), nogc (the same with gc disabled), sections (each host call
timed, warm run), cprofile (cProfile of a warm run)."""
import cProfile, gc, io, json, pstats, statistics, sys, time
import torch
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
from tinyllm.serve import PagedEngine

mode, n = sys.argv[1], int(sys.argv[2])
model = load_pretrained("cuda")
if mode in ("plain", "nogc"):
    if mode == "nogc":
        gc.disable()
    r = engine_time.scale(model, n, max(64, 8 * n))
    print(json.dumps({"mode": mode, "n": n, **{k: r[k] for k in ("tok_s", "first_run_tok_s", "host_us_per_step", "host_us_per_step_p90", "replay_alone_us", "gpu_busy_share", "gpu_us_per_step", "capture_s")}}), flush=True)
    sys.exit()
prompts, news = engine_time.workload(max(64, 8 * n), 0)
engine = PagedEngine(model, n, max_len=512, overlap=True)
engine.capture()
engine_time.serve(engine, prompts, news)
acc = {}
def timed(obj, name, label=None):
    f = getattr(obj, name); label = label or name
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
            acc[label + " n"] = acc.get(label + " n", 0) + 1
    setattr(obj, name, w)
t_start = time.perf_counter()
if mode == "sections":
    r = engine.rows
    for name in ("grow", "flush", "snapshot", "compaction", "move", "advance_host", "settle", "in_use", "release"):
        timed(r, name, "rows." + name)
    for name in ("admit", "download", "replay", "hand_out", "release", "record"):
        timed(engine, name)
    _, s = engine_time.serve(engine, prompts, news)
else:
    pr = cProfile.Profile(); pr.enable()
    _, s = engine_time.serve(engine, prompts, news)
    pr.disable()
steps = [x for x in engine.stats if x["t0"] >= t_start]
host = sorted(engine_time.host_per_step(engine, t_start))
print(f"{mode} {n} rows: {len(steps)} steps, {sum(news)/s:.0f} tok/s, host median {host[len(host)//2]*1e6:.1f} us, launch median {statistics.median(x['launch_s'] for x in steps)*1e6:.1f} us, read median {statistics.median(x['read_s'] for x in steps)*1e6:.1f} us, step_s median {statistics.median(x['step_s'] for x in steps)*1e6:.1f}")
if mode == "sections":
    for k in sorted(k for k in acc if not k.endswith(" n")):
        print(f"  {k:20s} {acc[k]/len(steps)*1e6:8.1f} us/step  {acc[k+' n']:6d} calls  {acc[k]/acc[k+' n']*1e6:8.1f} us/call")
else:
    out = io.StringIO()
    st = pstats.Stats(pr, stream=out); st.sort_stats("tottime").print_stats(40); st.sort_stats("cumtime").print_stats(40)
    print(out.getvalue())
