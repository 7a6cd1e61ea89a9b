"""Issue 28: Hugging Face's continuous batching with CUDA graphs and async batching, with the
cache sized by num_blocks (bench.HF_BATCHING), each setting in a process of its own: tok/s of
a second run of the bench's engine workload, through peers.hf_continuous_batching. Into
OUT.json."""
import json, sys, time
import torch
from tinyllm import load_pretrained
from tinyllm.lab import bench, engine_time, peers
out_path, which = sys.argv[1], int(sys.argv[2])
name, config = list(bench.HF_BATCHING.items())[which]
model = load_pretrained("cuda")
prompts, news = engine_time.workload(256)
t0 = time.perf_counter()
try:
    row = peers.hf_continuous_batching(model, prompts, news, give_up_s=150, **config)
    row.pop("ids")
except Exception as error:  # noqa: BLE001
    row = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
row["wall_s"] = round(time.perf_counter() - t0, 1)
print(name, config, row, flush=True)
json.dump({"name": name, "config": config, **row}, open(out_path, "w"), indent=1)
