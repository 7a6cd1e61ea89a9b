"""On the H200, in the same call as the new engine: the previous paged engine,
Engine(kv="paged", overlap=True) of main at COMMIT, at 32, 128 and 256 rows on the bench's
request distribution (8 requests a row, at least 64), warmed on the same requests (its graphs
are captured while serving, so the first run captures), then timed again: tok/s and host
time per step. Run from a copy of the tree at COMMIT, which has
no engine_time.host_per_step: host_per_step below is its formula (engine_time.HOST_PER_STEP)."""
import json, sys, time, torch
from tinyllm import Engine, load_pretrained
from tinyllm.lab import engine_time

def host_per_step(engine, t_start):
    steps = [s for s in engine.stats if s["t0"] >= t_start]
    admits = sorted((a["t0"], a["admit_s"]) for a in engine.admissions if a["t0"] >= t_start)
    out, i = [], 0
    for s in steps:
        admitted = 0.0
        while i < len(admits) and admits[i][0] < s["t0"]:
            admitted += admits[i][1]; i += 1
        out.append(s["step_s"] - s["read_s"] + admitted)
    return sorted(out), steps

model = load_pretrained("cuda")
rows = []
for n in (32, 128, 256):
    prompts, news = engine_time.workload(max(64, 8 * n))
    e = Engine(model, n, max_len=512, kv="paged", overlap=True)
    done1, s1 = engine_time.serve(e, prompts, news)  # warm: captures while serving
    t_start = time.perf_counter()
    done2, s2 = engine_time.serve(e, prompts, news)
    host, steps = host_per_step(e, t_start)
    r = {"engine": "Engine(kv='paged', overlap=True)", "commit": open("COMMIT").read().strip(),
         "n_rows": n, "n_requests": len(news), "n_tokens": sum(news),
         "first_run_tok_s": round(sum(news) / s1, 1), "tok_s": round(sum(news) / s2, 1),
         "steps": len(steps), "mean_rows": round(sum(s["n_active"] for s in steps) / len(steps), 1),
         "host_us_per_step": round(host[len(host) // 2] * 1e6, 1),
         "host_us_per_step_p90": round(host[int(0.9 * len(host))] * 1e6, 1),
         "tokens_identical_across_runs": [done1[k] for k in sorted(done1)] == [done2[k] for k in sorted(done2)]}
    print(json.dumps(r), flush=True)
    rows.append(r)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
