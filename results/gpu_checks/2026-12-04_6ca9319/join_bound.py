"""Device call E (issue 27): what joining the sampler to the step's last kernel could save at
most. PagedEngine's decode graphs captured three ways in one process: with the sampler kernel
(the package), with no sampler at all (the step writes ids from a fixed buffer: what a sampler
inside the head's kernel would leave, less that kernel's extra work), and with the reference's
ops. Each decode graph replayed alone (engine_time.replay_alone_us, 200 replays), interleaved
over 5 rounds, at 1, 8, 64 and 256 rows, right after capture (every row's length 0); median."""
import json, statistics, sys
import torch
import tinyllm.serve
from tinyllm import PagedEngine, load_pretrained
from tinyllm.generation import reference_sample, sample
from tinyllm.lab.engine_time import replay_alone_us

out = {"commit": open(".final/COMMIT").read().strip(), "torch": torch.__version__,
       "gpu": torch.cuda.get_device_name()}
model = load_pretrained("cuda")
ids = torch.zeros(256, dtype=torch.long, device="cuda")


def no_sampler(logits, *rest):
    return ids[: logits.shape[0]]


engines = {}
for name, fn in (("kernel", sample), ("no sampler", no_sampler), ("reference", reference_sample)):
    tinyllm.serve.sample = fn
    engines[name] = PagedEngine(model, 256, max_len=512)
    engines[name].capture()
    tinyllm.serve.sample = sample
times = {n: {k: [] for k in engines} for n in (1, 8, 64, 256)}
for _ in range(5):
    for n in times:
        for name, engine in engines.items():
            times[n][name].append(replay_alone_us(engine, n))
out["replay_alone_us"] = {n: {k: {"rounds": [round(x, 2) for x in v], "median": round(statistics.median(v), 2)}
                              for k, v in row.items()} for n, row in times.items()}
for n, row in out["replay_alone_us"].items():
    print(n, {k: v["median"] for k, v in row.items()}, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
