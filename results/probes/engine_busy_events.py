"""The paged engine's GPU busy share measured a second way, without the profiler: a CUDA
event before and after every replay the engine issues (each decode step with the block
fills it carries, each prefill graph with its upload), their elapsed times summed, over
the wall time of the same run (bench's engine workload, graphs, after a warm run). A move's
events bracket GPU work only: the host is ahead, so the GPU reaches the first event when it
is done with what came before. Eager work between replays (compaction's fills, the
ids' copies) is not counted, so the share is a lower bound of the GPU's busy time.
Run: python3 results/probes/engine_busy_events.py OUT.json"""

import json
import sys

import torch

from tinyllm import load_pretrained
from tinyllm.engine import Engine
from tinyllm.lab import engine_time as et


def bracketed(fn, pairs):
    def run(*args, **kwargs):
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn(*args, **kwargs)
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        pairs.append((start, end))
        return out

    return run


def measure(model, n_slots: int, name: str) -> dict:
    prompts, news = et.workload(256)
    engine = Engine(model, n_slots, max_len=512, use_graph=True, **et.ENGINES[name])
    engine.decoder.capture()
    et.serve(engine, prompts, news)  # warm: every graph captured
    pairs = []
    engine.decoder.step = bracketed(engine.decoder.step, pairs)
    engine.prefill_graphs.prefill = bracketed(engine.prefill_graphs.prefill, pairs)
    _, seconds = et.serve(engine, prompts, news)
    gpu_s = sum(a.elapsed_time(b) for a, b in pairs) / 1e3
    return {"engine": name, "n_slots": n_slots, "tok_s": round(sum(news) / seconds, 1),
            "seconds": round(seconds, 4), "replays": len(pairs), "gpu_s": round(gpu_s, 4),
            "gpu_busy_share": round(gpu_s / seconds, 4)}  # fmt: skip


def main(path):
    model = load_pretrained("cuda")
    rows = [measure(model, n, name) for n in (32, 8)
            for name in ("paged_prefill_graphs", "paged_overlap")]  # fmt: skip
    json.dump({"method": __doc__.split("\n\n")[0], "rows": rows}, open(path, "w"), indent=1)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main(sys.argv[1])
