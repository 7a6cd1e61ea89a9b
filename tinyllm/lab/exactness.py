"""Notebook 05's two comparisons: graph replay vs the same static step run eagerly (bit for
bit), and eager decode vs the static step (by how much, and where tokens flip).

compare_eager_static runs on any device; compare_replay needs CUDA, or a CPU with the graph
simulator (graph_api=tinyllm.lab.simgraph).
"""

import torch

from tinyllm import GraphDecoder, KVCache
from tinyllm.generation import decode_step, prefill


@torch.no_grad()
def compare_replay(
    model,
    idx,
    steps: int,
    pad_lens=None,
    buckets=None,
    requests: int = 2,
    check_reference: bool = False,
) -> dict:
    """Graph replay vs the same static step run eagerly, bit for bit, at every step, for
    `requests` requests back to back on the same two decoders. Needs CUDA."""
    ref = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    fast = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=True)
    # a second eager reference: is the eager static step itself deterministic?
    twin = (
        GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
        if check_reference
        else None
    )
    first, first_twin, windows, n = None, None, set(), 0
    for r in range(requests):
        a, b = ref.prefill(idx, pad_lens), fast.prefill(idx, pad_lens)
        if twin is not None:
            twin.prefill(idx, pad_lens)
        tok = a[:, -1:].argmax(-1)
        for s in range(steps):
            windows.add(fast.bucket_for(fast.cache.n + 1))
            a, b = ref.step(tok), fast.step(tok)
            n += 1
            if first is None and not torch.equal(a, b):
                first = {"request": r, "step": s, "max_abs_diff": (a - b).abs().max().item()}
            if twin is not None:
                c = twin.step(tok)
                if first_twin is None and not torch.equal(a, c):
                    first_twin = {
                        "request": r,
                        "step": s,
                        "max_abs_diff": (a - c).abs().max().item(),
                    }
            tok = a[:, -1].argmax(-1, keepdim=True)
    out = {
        "batch": idx.shape[0],
        "pad_lens": None if pad_lens is None else pad_lens.tolist(),
        "requests": requests,
        "steps": n,
        "windows": sorted(windows),
        "all_equal": first is None,
        "first_difference": first,
    }
    if twin is not None:
        out["reference_deterministic"] = first_twin is None
        out["reference_first_difference"] = first_twin
    return out


@torch.no_grad()
def compare_eager_static(model, idx, steps: int, pad_lens=None, buckets=None) -> dict:
    """Eager decode (dynamic cache, exact length, no mask) vs the static step (fixed window,
    masked), both fed the eager run's greedy tokens. Per step: the largest logit difference
    and the rows whose greedy token differs, with the eager top-1 minus top-2 margin there."""
    cache = KVCache(model.cfg.n_layers, first_valid=pad_lens)
    a = prefill(model, idx, cache)
    static = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    b = static.prefill(idx, pad_lens)
    diffs, flips, agree = [], [], 0
    for s in range(steps):
        la, lb = a[:, -1].float(), b[:, -1].float()
        diffs.append((la - lb).abs().max().item())
        ta, tb = la.argmax(-1), lb.argmax(-1)
        agree += int((ta == tb).sum())
        for row in (ta != tb).nonzero().flatten().tolist():
            top2 = la[row].topk(2).values
            flips.append({"step": s, "row": row, "margin": (top2[0] - top2[1]).item()})
        tok = ta[:, None]
        a = decode_step(model, cache, tok, check=False)
        b = static.step(tok, check=False)
    return {
        "batch": idx.shape[0],
        "steps": steps,
        "max_logit_diff_per_step": diffs,
        "max_logit_diff": max(diffs),
        "token_agreement": agree / (steps * idx.shape[0]),
        "first_flip_step": flips[0]["step"] if flips else None,
        "flips": flips,
    }
