"""Tokens and schedule of PagedEngine at two commits (new: this tree; prev: .prev/), on the H200
in bf16: 256 requests, greedy and seeded with an eos, overlap off and on, 32 rows."""
import json, sys
from tinyllm import PagedEngine, load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
prompts, news = engine_time.workload(256, seed=3)
sampling = [{} if i % 3 else {"temperature": 0.8, "top_k": 40, "seed": 1000 + i} for i in range(256)]
out = {}
for overlap in (False, True):
    e = PagedEngine(model, 32, max_len=512, eos_id=ord("."), overlap=overlap)
    rids = [e.submit(p, n, **s) for p, n, s in zip(prompts, news, sampling)]
    done = e.run()
    out[str(overlap)] = {"tokens": [done[r] for r in rids],
                         "schedule": [[int(r) for r in s["rows"]] for s in e.stats]}
json.dump(out, open(sys.argv[2], "w"))
print(sys.argv[1], "done", flush=True)
