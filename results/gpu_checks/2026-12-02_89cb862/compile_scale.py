"""H200: PagedEngine(compile=True) through lab.engine_time.scale at the sizes given, largest
first, in one process (Inductor's caches shared: each shape compiled once), then compile=False at
the same sizes in the same process; one JSON line each, with its wall seconds."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
for compile in (True, False):
    for n in [int(x) for x in sys.argv[2].split(",")]:
        t0 = time.perf_counter()
        r = engine_time.scale(model, n, max(64, 8 * n), compile=compile)
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        r["commit"] = open(".final/COMMIT").read().strip()
        print(json.dumps(r), flush=True)
        with open(sys.argv[1], "a") as f:
            f.write(json.dumps(r) + "\n")
