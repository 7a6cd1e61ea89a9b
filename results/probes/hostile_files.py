"""Hostile weights files, each loaded by tinyllm.load in a process of its own: the seconds load
takes and the peak memory it adds over the process before it (VmHWM less VmRSS, from
/proc/self/status), and whether it refused the file. Run on a CPU:

    python3 results/probes/hostile_files.py OUT.json

The files: a pickle renamed, other bytes, a truncated file, a header past the length limit, a
small file claiming a huge model, a header claiming more data than the file holds, non-finite
weights, weights that overflow the compute dtype, and a sparse file (a hole on disk) whose
zeros fill a model at 98% of the course's parameter limit."""

import dataclasses
import json
import math
import os
import pickle
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import torch
from safetensors.torch import save_file

from tinyllm import get_config, save
from tinyllm.checkpoint import expected_shapes
from tinyllm.model import Transformer

MEASURE = """
import sys, time
def status(key):
    return next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith(key))
from tinyllm import load, get_config
from tinyllm.checkpoint import expected_shapes
expected_shapes(get_config("toy"))  # the imports a load makes, before the baseline
base = status("VmRSS")
t0 = time.perf_counter()
try:
    load(sys.argv[1])
    outcome = "loaded"
except ValueError as e:
    outcome = "refused: " + str(e)[:160]
print(time.perf_counter() - t0, status("VmHWM") - base, outcome, sep="\\t")
"""


def raw(path: Path, header: dict, data: bytes = b"", size: int | None = None) -> None:
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head + data)
        if size is not None:
            f.truncate(8 + len(head) + size)  # the rest a hole: zeros, nothing on disk


def largest_config():
    """The tiny config widened until the next step would pass the parameter limit."""
    cfg, best = get_config("tiny"), None
    for d in range(128, 2048, 128):
        try:
            c = dataclasses.replace(cfg, d_model=d, ffn_hidden=4 * d, n_heads=d // 64,
                                    n_kv_heads=d // 128)  # fmt: skip
            expected_shapes(c)
        except ValueError:
            break
        best = c
    for f in range(best.ffn_hidden, 64 * best.ffn_hidden, 64):
        try:
            expected_shapes(dataclasses.replace(best, ffn_hidden=f))
        except ValueError:
            break
        last = f
    return dataclasses.replace(best, ffn_hidden=last)


def files(d: Path) -> dict[str, Path]:
    toy = Transformer(get_config("toy"))
    good = d / "good.safetensors"
    save(toy, good)
    config = json.dumps(toy.cfg.to_dict())
    out = {"a good toy model (the baseline)": good}
    p = d / "pickle.safetensors"
    p.write_bytes(pickle.dumps({"x": 1}))
    out["a pickle renamed"] = p
    p = d / "bytes.safetensors"
    p.write_bytes(os.urandom(4096))
    out["other bytes"] = p
    p = d / "truncated.safetensors"
    p.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    out["a truncated file"] = p
    p = d / "stubs.safetensors"
    raw(p, {f"t{i}": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]}
            for i in range(60_000)}, bytes(120_000))  # fmt: skip
    out["a header of 60,000 stub tensors"] = p
    p = d / "huge.safetensors"
    big = dict(toy.cfg.to_dict(), d_model=10**9, n_heads=10**6, n_kv_heads=10**6,
               ffn_hidden=10**9)  # fmt: skip
    save_file({"norm.weight": torch.zeros(2)}, str(p), metadata={"config": json.dumps(big)})
    out["a small file claiming a 10**9-wide model"] = p
    p = d / "liar.safetensors"
    raw(p, {"__metadata__": {"config": config},
            "tok_emb.weight": {"dtype": "BF16", "shape": [10**9, 64],
                               "data_offsets": [0, 2 * 64 * 10**9]}}, bytes(16))  # fmt: skip
    out["a header claiming 128 GB in a file of 16 bytes"] = p
    tensors = {k: v.to(torch.float32).contiguous() for k, v in toy.state_dict().items()}
    tensors["blocks.1.ffn.w2.weight"][3, 5] = math.nan
    p = d / "nan.safetensors"
    save_file(tensors, str(p), metadata={"config": config})
    out["a NaN weight"] = p
    tensors["blocks.1.ffn.w2.weight"][3, 5] = 0.0
    tensors["norm.weight"][:2] = 3e38
    p = d / "overflow.safetensors"
    save_file(tensors, str(p), metadata={"config": config})
    out["weights of 3e38, finite in fp32"] = p
    c = largest_config()
    header, offset = {"__metadata__": {"config": json.dumps(c.to_dict())}}, 0
    for k, shape in expected_shapes(c).items():
        n = 2 * math.prod(shape)
        header[k] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    p = d / "sparse.safetensors"
    raw(p, header, size=offset)
    params = sum(math.prod(s) for s in expected_shapes(c).values())
    out[f"a sparse file of zeros, {params:,} parameters"] = p
    return out


def main(out_path: str) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in files(Path(tmp)).items():
            runs = []
            for _ in range(3):  # the first run of each reads the file from disk
                res = subprocess.run([sys.executable, "-c", MEASURE, str(path)],
                                     capture_output=True, text=True, timeout=120)  # fmt: skip
                seconds, mb, outcome = res.stdout.strip().split("\t")
                runs.append((float(seconds), float(mb), outcome))
            rows.append({"file": name, "bytes": path.stat().st_size,
                         "bytes_on_disk": path.stat().st_blocks * 512,
                         "seconds": [round(r[0], 3) for r in runs],
                         "peak_mb_added": [round(r[1], 1) for r in runs],
                         "outcome": runs[0][2]})  # fmt: skip
            print(rows[-1], flush=True)
    provenance = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} "
                             f"cores, CPU only", "python": platform.python_version(),
                  "torch": torch.__version__,
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
                  "command": "python3 results/probes/hostile_files.py OUT.json"}  # fmt: skip
    json.dump({"provenance": provenance, "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
