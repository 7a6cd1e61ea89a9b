"""One engine at one size, in its own process (run from the tree of that engine): PagedEngine
through lab.engine_time.scale; argv: which (new/prev/new1: new with min_admit=1) n_rows out.jsonl."""
import json, sys
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
which, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
model = load_pretrained("cuda")
kw = {"min_admit": 1} if which == "new1" else {}
r = engine_time.scale(model, n, max(64, 8 * n), **kw)
r["engine"] = which
r["commit"] = open("COMMIT" if which == "prev" else ".final/COMMIT").read().strip()
with open(out, "a") as f:
    f.write(json.dumps(r) + "\n")
print(which, n, r["tok_s"], r["host_us_per_step"], r.get("replay_alone_us"), r.get("gpu_busy_share"),
      r.get("gpu_us_per_step"), r.get("fills"), r.get("gpu_us_per_fill"), r["first_run_tok_s"], r["capture_s"], flush=True)
