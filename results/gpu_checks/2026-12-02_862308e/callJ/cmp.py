"""Tokens of the paged engine, old (Engine(kv="paged"), main) or new (PagedEngine), on the H200
in bf16: greedy and seeded requests with an eos, overlap off and on, 32 rows."""
import json, random, sys, torch
from tinyllm import load_pretrained, Tokenizer
from tinyllm.lab import engine_time
new = sys.argv[1] == "new"
model = load_pretrained("cuda")
prompts, news = engine_time.workload(256, seed=3)
rng = random.Random(0)
sampling = [{} if i % 3 else {"temperature": 0.8, "top_k": 40, "seed": 1000 + i} for i in range(256)]
out = {}
for overlap in (False, True):
    if new:
        from tinyllm import PagedEngine
        e = PagedEngine(model, 32, max_len=512, eos_id=ord("."), overlap=overlap)
    else:
        from tinyllm import Engine
        e = Engine(model, 32, max_len=512, eos_id=ord("."), kv="paged", overlap=overlap)
    rids = [e.submit(p, n, **s) for p, n, s in zip(prompts, news, sampling)]
    done = e.run()
    sched = [[int(r) for r in s["rows"]] if new else s["slots"] for s in e.stats]
    if not new:
        sched = [[-1 if r is None else r for r in row] for row in sched]
    out[str(overlap)] = {"tokens": [done[r] for r in rids], "schedule": sched}
json.dump(out, open(sys.argv[2], "w"))
print(sys.argv[1], "done", flush=True)
