"""On the H200, in the same call as the new engine: PagedEngine of main at COMMIT (before the
host path's second cut), at 32, 128 and 256 rows (lab.engine_time.scale of that commit)."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
rows = []
for n in (32, 128, 256):
    r = engine_time.scale(model, n, max(64, 8 * n))
    r["commit"] = open("COMMIT").read().strip()
    print(json.dumps(r), flush=True)
    rows.append(r)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
