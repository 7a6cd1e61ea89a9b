"""On the H200: PagedEngine(overlap=True, compile=False) at 1 to 256 rows on the bench's request
distribution, 8 requests a row (at least 64) (lab.engine_time.scale)."""
import json, sys, time, torch
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
rows = []
for n in (1, 8, 32, 64, 128, 256):
    t0 = time.perf_counter()
    r = engine_time.scale(model, n, max(64, 8 * n))
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(r), flush=True)
    rows.append(r)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
