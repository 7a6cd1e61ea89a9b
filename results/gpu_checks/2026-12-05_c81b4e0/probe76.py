"""Does TEARDOWN_CUPTI=1 work when set inside the process, after torch is imported and CUDA is
used, but before the first profiler session? A graph of 40 one-number PDL kernels timed with
the first event before the replay's launch (probe74's 'node'), 5 rounds of 30 replays, before
a session and after one and two; argv[2] 'set' sets os.environ['TEARDOWN_CUPTI'] = '1' just
before the first session, 'unset' leaves it out."""

import json
import os
import statistics
import sys

import torch

from tinyllm.lab import bench, floor

out_path, how = sys.argv[1], sys.argv[2]
node = floor.nodes()["triton, PDL"]
x = torch.zeros(1, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    node(x)
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(40):
        node(x)


def rounds():
    out = []
    for _ in range(5):
        times = []
        for _ in range(30):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3 / 40)
        out.append(round(statistics.median(times), 3))
    return out


def session():
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        g.replay()
        torch.cuda.synchronize()


res = {"provenance": bench.provenance(f"python3 .final/probe76.py OUT.json {how}"), "how": how,
       "before": rounds()}
if how == "set":
    os.environ["TEARDOWN_CUPTI"] = "1"
session()
res["after one session"] = rounds()
session()
res["after two sessions"] = rounds()
print(how, {k: statistics.median(v) for k, v in res.items() if isinstance(v, list)}, flush=True)
json.dump(res, open(out_path, "w"), indent=1)
