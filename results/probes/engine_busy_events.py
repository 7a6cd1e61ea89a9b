"""The paged engine's GPU busy share measured a second way, without the profiler: a CUDA event
before and after every replay the engine issues (Graphs.record_events: each decode step, each
prefill graph), their elapsed times summed, over the wall time of the same run (bench's
engine workload, graphs, after a warm run). A bracket holds the
move's GPU work from the moment the GPU reaches its first event: where the host issued that
work before then (the host ahead of the GPU, as overlap=True keeps it), nothing else; where
the GPU had gone idle waiting for the host (overlap=False), also the host's issuing of it
(the graph's launch). Eager work between replays (the rows' moves, the ids' copies) is not
counted. The engines are PagedEngine, as lab.engine_time.ENGINES builds them.
Run: python3 results/probes/engine_busy_events.py OUT.json"""

import json
import sys

from tinyllm import load_pretrained
from tinyllm.lab import engine_time as et


def measure(model, n_rows: int, name: str) -> dict:
    prompts, news = et.workload(256)
    engine = et.build(name, model, n_rows, max_len=512, use_graph=True)
    et.capture(engine)  # every graph, before serving
    et.serve(engine, prompts, news)  # warm: every kernel once
    pairs = []
    for graphs in (engine.decode_graphs, engine.fill_graphs):
        graphs.record_events(pairs)  # a CUDA event before and after every replay
    _, seconds = et.serve(engine, prompts, news)
    gpu_s = sum(a.elapsed_time(b) for a, b in pairs) / 1e3
    return {"engine": name, "n_slots": n_rows, "tok_s": round(sum(news) / seconds, 1),
            "seconds": round(seconds, 4), "replays": len(pairs), "gpu_s": round(gpu_s, 4),
            "gpu_busy_share": round(gpu_s / seconds, 4)}  # fmt: skip


def main(path):
    model = load_pretrained("cuda")
    rows = [measure(model, n, name) for n in (32, 8)
            for name in ("paged_prefill_graphs", "paged_overlap")]  # fmt: skip
    method = " ".join(__doc__.split("\nRun:")[0].split())
    json.dump({"method": method, "rows": rows}, open(path, "w"), indent=1)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main(sys.argv[1])
