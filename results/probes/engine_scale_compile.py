"""On the H200: PagedEngine(overlap=True) on the bench's request distribution, 8 requests a row
(at least 64), at the sizes given (lab.engine_time.scale), compile=False then compile=True at
each size, in one process: capture() with compile=True compiles each capture size's step once
(Inductor, the course's settings), then captures it; its seconds are capture_and_compile_s."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
rows = []
for n in [int(x) for x in sys.argv[2].split(",")]:
    for compile in (False, True):
        t0 = time.perf_counter()
        r = engine_time.scale(model, n, max(64, 8 * n), compile=compile)
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(r), flush=True)
        rows.append(r)
        json.dump(rows, open(sys.argv[1], "w"), indent=1)
