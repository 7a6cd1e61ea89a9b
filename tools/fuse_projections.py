"""Re-save a weights file of the first layout (separate wq, wk, wv and w1, w3) in the fused
layout of tinyllm.model (wqkv, w13): the same bf16 numbers, rows concatenated, metadata
kept. The shipped tiny.safetensors was converted this way (see its model card).

    python tools/fuse_projections.py OLD.safetensors NEW.safetensors
"""

import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def fuse(old: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    new = {}
    for name, t in old.items():
        prefix, _, leaf = name.rpartition(".")[0].rpartition(".")
        if leaf in ("wk", "wv", "w3"):
            continue  # taken with wq / w1
        if leaf == "wq":
            parts = [old[f"{prefix}.{w}.weight"] for w in ("wq", "wk", "wv")]
            new[f"{prefix}.wqkv.weight"] = torch.cat(parts)
        elif leaf == "w1":
            new[f"{prefix}.w13.weight"] = torch.cat([t, old[f"{prefix}.w3.weight"]])
        else:
            new[name] = t
    return new


def main(src: str, dst: str) -> None:
    with safe_open(src, framework="pt") as f:
        meta, old = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    save_file({k: v.contiguous() for k, v in fuse(old).items()}, dst, metadata=meta)


if __name__ == "__main__":
    main(*sys.argv[1:3])
