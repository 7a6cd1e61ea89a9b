"""H200: PagedEngine with the course's Inductor settings and the batch dimension left dynamic
(torch.compile's dynamic=None: the first shape compiled as it is, later ones once with a
symbolic batch), through lab.engine_time.scale at the sizes given, in one process, in order;
one JSON line each, with its wall seconds (capture and compile included)."""
import json, sys, time
from tinyllm import load_pretrained
from tinyllm.graphs import COURSE_COMPILE
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
compile = COURSE_COMPILE | {"dynamic": None}
for n in [int(x) for x in sys.argv[2].split(",")]:
    t0 = time.perf_counter()
    r = engine_time.scale(model, n, max(64, 8 * n), compile=compile)
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    r["engine"] = "compile dynamic=None"
    r["commit"] = open(".final/COMMIT").read().strip()
    print(json.dumps({k: v for k, v in r.items() if k != "tokens_identical_across_runs"} | {"tok_ident": r["tokens_identical_across_runs"]}), flush=True)
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(r) + "\n")
