"""One engine at one size, in its own process (run from the tree of that engine): PagedEngine
through lab.engine_time.scale (new and prev), or Engine(kv="paged") as old_scale.py runs it."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
which, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = load_pretrained("cuda")
if which != "old":
    r = engine_time.scale(model, n, max(64, 8 * n))
else:
    sys.path.insert(0, ".")
    from tinyllm import Engine
    def host_per_step(engine, t_start):
        steps = [s for s in engine.stats if s["t0"] >= t_start]
        admits = sorted((a["t0"], a["admit_s"]) for a in engine.admissions if a["t0"] >= t_start)
        res, i = [], 0
        for s in steps:
            admitted = 0.0
            while i < len(admits) and admits[i][0] < s["t0"]:
                admitted += admits[i][1]; i += 1
            res.append(s["step_s"] - s["read_s"] + admitted)
        return sorted(res), steps
    prompts, news = engine_time.workload(max(64, 8 * n))
    e = Engine(model, n, max_len=512, kv="paged", overlap=True)
    done1, s1 = engine_time.serve(e, prompts, news)
    t_start = time.perf_counter()
    done2, s2 = engine_time.serve(e, prompts, news)
    host, steps = host_per_step(e, t_start)
    r = {"n_rows": n, "n_tokens": sum(news), "tok_s": round(sum(news) / s2, 1),
         "host_us_per_step": round(host[len(host) // 2] * 1e6, 1)}
r["engine"], r["commit"] = which, open("COMMIT").read().strip() if which != "new" else open(".final/COMMIT").read().strip()
with open(out, "a") as f:
    f.write(json.dumps(r) + "\n")
print(which, n, r["tok_s"], r["host_us_per_step"], r.get("replay_alone_us"), r.get("gpu_busy_share"), flush=True)
