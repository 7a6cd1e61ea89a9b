"""The paged engine's host costs piece by piece on a GPU (µs, median of repeats, the GPU idle
before each call): a graph replay with and without sampling inside, the step's bookkeeping,
an admission of one request (paged and slots). Run: python3 results/probes/engine_host.py OUT.json"""

import json
import sys
import time

import torch

from tinyllm import load_pretrained
from tinyllm.engine import Engine
from tinyllm.graphs import SlotGraphDecoder
from tinyllm.paged import PagedKVCache, to_device


def host_us(fn, n=100):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return round(sorted(out)[len(out) // 2] * 1e6, 1)


def main(path):
    m = load_pretrained("cuda")
    res = {}
    e = Engine(m, 32, max_len=1024, kv="paged", use_graph=True)
    e.decoder.capture()
    for _ in range(32):
        e.submit(list(range(1, 40)), 900)
    e.admit()
    e.step()
    e.step()
    dec, cache = e.decoder, e.slots
    g, _ = dec.graphs[32]
    res["replay_sampling_us"] = host_us(g.replay)
    res["grow_us"] = host_us(cache.grow)
    res["tok_clone_us"] = host_us(lambda: dec.tok.clone())
    res["send_to_host_us"] = host_us(lambda: e.send_to_host([None] * 32, dec.tok[:32, 0]))
    e.in_flight.clear()
    res["scalar_fill_us"] = host_us(lambda: cache.block_table.__setitem__((31, 60), 0))
    res["to_device_3_us"] = host_us(lambda: to_device([1, 2, 3], "cuda"))
    res["snapshot_us"] = host_us(cache.snapshot)
    res["graph_key_us"] = host_us(dec.graph_key)
    res["decoder_step_us"] = host_us(lambda: dec.step(None, check=False), 50)
    res["engine_step_us"] = host_us(e.step, 50)
    plain = SlotGraphDecoder(m, PagedKVCache(m.cfg.n_layers, 32, 1024, "cuda"), sampling=False)
    plain.capture((32,))
    res["replay_plain_us"] = host_us(plain.graphs[32][0].replay)
    # GPU time of one replay each
    for name, graph in (("sampling", g), ("plain", plain.graphs[32][0])):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        for _ in range(50):
            graph.replay()
        b.record()
        torch.cuda.synchronize()
        res[f"replay_{name}_gpu_us"] = round(a.elapsed_time(b) * 1e3 / 50, 1)
    for kv in ("paged", "slots"):
        eng = Engine(m, 32, max_len=512, kv=kv, use_graph=True)
        prompt = list(range(1, 40))

        def admit_one():
            eng.submit(prompt, 5)
            eng.admit()

        def clear():
            for row in list(eng.running):
                eng.slots.release(row)
            eng.running.clear()
            if kv == "paged":
                eng.in_flight.clear()

        times = []
        for _ in range(30):
            torch.cuda.synchronize()
            t = time.perf_counter()
            admit_one()
            times.append(time.perf_counter() - t)
            torch.cuda.synchronize()
            clear()
        res[f"admit_one_{kv}_us"] = round(sorted(times)[15] * 1e6, 1)
    json.dump(res, open(path, "w"), indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main(sys.argv[1])
