"""What the pictures of the mechanism show (mechanism.py draws them), computed by the book:
a decode step's launches from a recording, one static decode step watched on a real
StaticKVCache, a sequence walking through the buckets, and a real Engine's slots.

Everything here runs on a CPU in a second or two: the cache and the engine are the book's
own, with use_graph=False (the identical static step, eagerly). Sizes that only a GPU can
measure (launch and kernel times, pool bytes) come from a recording (results/<gpu>.json)
and say so, or are ILLUSTRATIVE and say that instead.
"""

import numpy as np
import torch

from tinyllm import Engine, GraphDecoder, Tokenizer, Transformer, get_config, load_pretrained
from tinyllm.course.viz.serving import slot_segments
from tinyllm.course.viz.style import MIB, provenance_note

ILLUSTRATIVE = "illustrative numbers, not a measurement"

# --- a decode step's launches (notebook 01) --------------------------------------------------

ILLUSTRATIVE_LAUNCHES = {
    "kernels": 12,
    "launch_us": 8.0,
    "kernel_us": 3.0,
    "graph_launch_us": 10.0,
    "source": ILLUSTRATIVE,
}


def launch_costs(res: dict) -> dict:
    """An eager decode step at batch 1 from a recording, as launches_figure draws it: its
    kernel count (kernels_per_step), and per kernel the step's CPU issue time and GPU kernel
    time divided by that count; the CPU time to issue one graph replay; where they were
    recorded ("source") and how they were derived ("how")."""
    i = res["cpu_time"]["batch"].index(1)
    j = res["gpu_kernel_time"]["batch"].index(1)
    n = res["kernels_per_step"]["eager"]
    return {
        "kernels": n,
        "launch_us": res["cpu_time"]["eager_us"][i] / n,
        "kernel_us": res["gpu_kernel_time"]["eager_us"][j] / n,
        "graph_launch_us": res["cpu_time"]["graph_us"][i],
        "source": provenance_note(res) or "a recording without provenance",
        "how": f"batch 1: the eager step's CPU issue time and GPU kernel time, each over its "
        f"{n} kernels, and a graph replay's CPU issue time",
    }


def launch_schedule(costs: dict) -> dict[str, list[tuple[float, float]]]:
    """(start, duration) in µs of every CPU launch and GPU kernel of one step, eager and as
    a graph. Eager: launch k follows launch k-1 and kernel k starts when its launch is done
    (or when kernel k-1 ends, if later). Graph: one launch, then every kernel back to back."""
    n, L, K, G = (costs[k] for k in ("kernels", "launch_us", "kernel_us", "graph_launch_us"))
    kernels, end = [], 0.0
    for k in range(n):
        kernels.append((max((k + 1) * L, end), K))
        end = kernels[-1][0] + K
    return {
        "eager cpu": [(k * L, L) for k in range(n)],
        "eager gpu": kernels,
        "graph cpu": [(0.0, G)],
        "graph gpu": [(G + k * K, K) for k in range(n)],
    }


# --- the static cache at one decode step (notebook 02) --------------------------------------


@torch.no_grad()
def static_cache_step(
    pad_lens=(0, 3, 5),
    prompt_len: int = 9,
    steps: int = 2,
    max_len: int = 24,
    buckets=(8, 16, 24),
    seed: int = 0,
) -> dict:
    """One decode step of the book's static step, watched on the CPU: a toy model's
    GraphDecoder(use_graph=False) prefills a left-padded prompt, decodes `steps` tokens,
    then one more step. Returns what that step did, read off its StaticKVCache: "pos" (the
    device position before it), "window", "first_valid", "attended" (B, window: the finite
    entries of the decode bias it used) and "written" (B, max_len: where layer 0's keys
    changed, i.e. where index_copy_ wrote)."""
    torch.manual_seed(seed)
    model = Transformer(get_config("toy")).eval()
    B = len(pad_lens)
    dec = GraphDecoder(model, B, max_len=max_len, buckets=buckets, use_graph=False)
    dec.prefill(torch.randint(0, 256, (B, prompt_len)), torch.tensor(pad_lens))
    tok = torch.zeros(B, 1, dtype=torch.long)
    for _ in range(steps):
        dec.step(tok)
    cache = dec.cache
    pos, window = int(cache.pos), dec.graph_key()
    keys_before = cache.k[0].clone()
    dec.step(tok)
    return {
        "pos": pos,
        "window": window,
        "max_len": max_len,
        "buckets": dec.buckets,
        "first_valid": cache.first_valid.tolist(),
        "attended": torch.isfinite(cache.bias[:, 0, :window]),
        "written": (cache.k[0] != keys_before).any(dim=(1, 3)),
    }


CELLS = ("beyond the window:\nnot read", "attended key", "later key: masked", "pad key: masked")


def cache_cells(step: dict) -> np.ndarray:
    """(B, max_len) codes into CELLS: 1 where the step attended, 3 for pads and 2 for later
    keys inside the window, 0 beyond it."""
    att = np.asarray(step["attended"], dtype=bool)
    W = att.shape[1]
    pad = np.arange(step["max_len"])[None, :] < np.asarray(step["first_valid"])[:, None]
    cells = np.where(pad, 3, 2)
    cells[:, :W] = np.where(att, 1, cells[:, :W])
    cells[:, W:] = 0
    return cells


# --- buckets and pools (notebooks 03 and 04) -------------------------------------------------


def walk_lengths(buckets) -> list[int]:
    """Two lengths per bucket: the first it holds and its last (its own size)."""
    edges = (0, *buckets)
    return [n for lo, hi in zip(edges, edges[1:]) for n in dict.fromkeys((lo + 1, hi))]


ILLUSTRATIVE_POOLS = {
    "windows": [128, 256, 512, 1024],
    "pool_bytes": [MIB, 2 * MIB, 4 * MIB, 8 * MIB],
    "shared_pool_bytes": 8 * MIB,
}

# --- the engine's slots (notebook 06) --------------------------------------------------------

DEMO_REQUESTS = (
    ("The for statement", 10),
    ("A class definition", 20),
    ("The import", 10),
    ("Exceptions are", 12),
    ("The while loop", 8),
    ("Lambda", 14),
)


@torch.no_grad()
def engine_slots_run(
    n_slots: int = 3,
    requests=DEMO_REQUESTS,
    model=None,
    eos: str = "\n",
    max_len: int = 64,
    buckets=(16, 32, 64),
) -> dict:
    """Serve (prompt, max_new_tokens) requests through a real Engine on the CPU (the shipped
    model unless `model` is given), with eos_id the id of `eos` (a newline: a request also
    stops at the end of its line). Returns the engine's "stats", "n_slots", "eos_id", "eos",
    "model" (which), "max_new_tokens" and "outputs" (run()'s generated ids) by request id."""
    name = "the shipped model" if model is None else "a given model"
    model = load_pretrained(device="cpu") if model is None else model
    tokenizer = Tokenizer()
    (eos_id,) = tokenizer.encode(eos)
    engine = Engine(model, n_slots, max_len, use_graph=False, eos_id=eos_id, buckets=buckets)
    limits = {engine.submit(tokenizer.encode(p), n): n for p, n in requests}
    outputs = engine.run()
    return {
        "stats": engine.stats,
        "n_slots": n_slots,
        "eos_id": eos_id,
        "eos": eos,
        "model": name,
        "max_new_tokens": limits,
        "outputs": outputs,
    }


def slot_events(run: dict) -> list[dict]:
    """Each request's stretch in a slot (slot_segments of the stats), with why it ended:
    "EOS" (its last id is eos_id), "length" (max_new_tokens reached) or None (still
    running when the stats end); whether it entered the lowest slot free at that step
    (queued requests, in order, take the free slots in order); and whether it took over a
    slot freed at the step before ("took_freed")."""
    stats, n_slots = run["stats"], run["n_slots"]
    events = []
    for slot, rid, first, n in slot_segments(stats, n_slots):
        out = run["outputs"].get(rid)
        why = None if out is None else "EOS" if out[-1] == run["eos_id"] else "length"
        before = stats[first - 1]["slots"] if first else [None] * n_slots
        now = stats[first]["slots"]  # a slot is free unless its holder stays on
        free = [s for s in range(n_slots) if now[s] is None or now[s] != before[s]]
        newcomers = sorted(r for s, r in enumerate(now) if r is not None and r != before[s])
        i = newcomers.index(rid)
        events.append(
            {"slot": slot, "rid": rid, "first": first, "n": n, "end": why,
             "lowest_free": i < len(free) and free[i] == slot,
             "took_freed": before[slot] is not None}
        )  # fmt: skip
    return events
