"""Notebook 05's two comparisons: graph replay vs the same static step run eagerly (bit for
bit), and eager decode vs the static step (by how much, and where tokens flip); and what
SDPA returns for a row with no key to attend to (notebooks 02 and 06).

compare_eager_static runs on any device; compare_replay needs CUDA.
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tinyllm import GraphDecoder, KVCache
from tinyllm.generation import decode_step, prefill
from tinyllm.kv_cache import additive


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
            windows.add(fast.graph_key())
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


@contextlib.contextmanager
def without_onednn():
    """PyTorch's own CPU kernels inside the block, not oneDNN's. oneDNN picks its bf16 matrix
    products by the CPU (its AMX units where it has them), so a bf16 run's differences and
    flips change from one CPU to another. (torch.backends.mkldnn.flags does the same, with a
    warning on CPU builds.)"""
    was = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = was


@torch.no_grad()
def compare_eager_static(model, idx, steps: int, pad_lens=None, buckets=None) -> dict:
    """Eager decode (dynamic cache, exact length, no mask) vs the static step (fixed window,
    masked), both fed the eager run's greedy tokens. Per step: the largest logit difference,
    each row's eager top-1 minus top-2 margin, and the rows whose greedy token differs, with
    that margin. The run's closest call is its smallest margin: a token can flip only where
    its margin is at most twice the step's difference (top-1 down by it, top-2 up by it)."""
    cache = KVCache(model.cfg.n_layers, pad_lens)
    a = prefill(model, idx, cache)
    static = GraphDecoder(model, idx.shape[0], buckets=buckets, use_graph=False)
    b = static.prefill(idx, pad_lens)
    diffs, margins, flips, agree = [], [], [], 0
    for s in range(steps):
        la, lb = a[:, -1].float(), b[:, -1].float()
        diffs.append((la - lb).abs().max().item())
        top2 = la.topk(2, dim=-1).values
        margins.append((top2[:, 0] - top2[:, 1]).tolist())
        ta, tb = la.argmax(-1), lb.argmax(-1)
        agree += int((ta == tb).sum())
        for row in (ta != tb).nonzero().flatten().tolist():
            flips.append({"step": s, "row": row, "margin": margins[s][row]})
        tok = ta[:, None]
        a = decode_step(model, cache, tok, check=False)
        b = static.step(tok, check=False)
    closest = min((m, s, r) for s, row_margins in enumerate(margins)
                  for r, m in enumerate(row_margins))  # fmt: skip
    return {
        "batch": idx.shape[0],
        "steps": steps,
        "max_logit_diff_per_step": diffs,
        "max_logit_diff": max(diffs),
        "token_agreement": agree / (steps * idx.shape[0]),
        "first_flip_step": flips[0]["step"] if flips else None,
        "flips": flips,
        "margins": margins,
        "closest_call": {"step": closest[1], "row": closest[2], "margin": closest[0]},
    }


def fully_masked_row(device="cpu", dtype=torch.float32, backends=None) -> dict:
    """What F.scaled_dot_product_attention returns for a query row that may attend to no key,
    per backend and kind of mask: {"MATH, bool mask": {"nan", "all_zero", "first_values"},
    ...}, or {"error"} where the backend has no kernel for it. The cases and the schema of
    tools/gpu_probe.py, whose GPU run is results/h200_probe.json. Default backends: MATH and
    FLASH_ATTENTION on a CPU; MATH, EFFICIENT_ATTENTION and CUDNN_ATTENTION on CUDA. The
    course never depends on the answer: every mask it builds leaves each row a key."""
    if backends is None:
        backends = (
            [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]
            if torch.device(device).type == "cpu"
            else [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
        )
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 32, generator=g).to(device, dtype) for n in (2, 16, 16))
    keep = torch.ones(1, 1, 2, 16, dtype=torch.bool, device=device)
    keep[..., 1, :] = False  # query row 1 may attend to no key
    masks = {"bool": keep, "additive": additive(keep, dtype)}
    out = {}
    for backend in backends:
        for kind, mask in masks.items():
            key = f"{backend.name}, {kind} mask"
            try:
                with sdpa_kernel([backend]):
                    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            except RuntimeError as e:
                out[key] = {"error": str(e).splitlines()[0][:200]}
                continue
            row = y[0, :, 1].float()
            out[key] = {
                "nan": bool(row.isnan().any()),
                "all_zero": bool((row == 0).all()),
                "first_values": [round(x, 4) for x in row[0, :4].tolist()],
            }
    return out


def what_came_back(row: dict) -> str:
    """One entry of fully_masked_row() (or of the recorded probe) in words."""
    if "error" in row:
        return f"no kernel ({row['error'][:50]})"
    if row["nan"]:
        return "NaN"
    if row["all_zero"]:
        return "zeros"
    return f"other values, {row['first_values']} ..."
