"""The new PagedEngine at 1, 8 and 64 rows (lab.engine_time.scale, 8 requests a row, at least 64)."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
rows = []
for n in (1, 8, 64):
    t0 = time.perf_counter()
    r = engine_time.scale(model, n, max(64, 8 * n))
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    r["commit"] = open(".final/COMMIT").read().strip()
    print(json.dumps(r), flush=True)
    rows.append(r)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)
