"""Which batch sizes to capture, and what their graphs cost (notebook 08's capture sizes).

    python -m tinyllm.lab.capture_policy OUT.json    # on a GPU: padding and measured graphs

The paged engine replays one graph per capture size: a step of n rows runs the smallest
capture size >= n, and its extra rows are padding, computed and thrown away. More sizes mean
less padding but more graphs to capture at start-up and to hold in the shared pool. Every
serving engine picks its own list; here they are side by side, each a function of the
maximum batch (the engine's n_slots):

- PRESETS: each engine's default list, as its code builds it (the citation above each);
- occupancy() and padding(): the bench's engine workload served on the host alone, every
  free row taking the next request at once (min_admit=1), and each preset's padded rows (pure
  arithmetic, any machine);
- measure(): each preset's graphs captured into one pool, largest first and smallest first
  (seconds and the pool's bytes), beside the estimate "pool of the largest graph × number of
  graphs" (the per-graph linear estimate that vLLM issue #45178 criticises).

Not modelled: what a padded row costs in time (a step of 32 rows is not 32/31 the time of 31
rows on a launch-bound GPU; the bench's step times say what it costs), and the sizes an
engine adds for speculative decoding or data parallelism.
"""

import argparse
import json
import sys
import time
from collections import Counter, deque
from pathlib import Path

import torch

from tinyllm import PagedEngine, bucket_for, load_pretrained
from tinyllm.checkpoint import validate_outputs, write_whole
from tinyllm.graphs import default_capture_sizes
from tinyllm.lab.timing import pool_bytes

# --- the presets: each engine's default capture sizes for a maximum batch -----------------


def nano_vllm(max_batch: int) -> list[int]:
    # GeeeekExplorer/nano-vllm, nanovllm/engine/model_runner.py (commit 359f8ca),
    # capture_cudagraph(): max_bs = min(max_num_seqs, 512);
    # graph_bs = [1, 2, 4, 8] + list(range(16, max_bs + 1, 16)), captured largest first.
    max_bs = min(max_batch, 512)
    return [1, 2, 4, 8] + list(range(16, max_bs + 1, 16))


def vllm(max_batch: int) -> list[int]:
    # vllm-project/vllm, vllm/config/vllm.py (commit 09f030e), _set_cudagraph_sizes():
    # largest size min(max_num_seqs * 2, 512) without speculative tokens (and at most
    # max_num_batched_tokens, larger here), then [1, 2, 4] + range(8, min(max + 1, 256), 8)
    # + range(256, max + 1, 16). Sizes above max_num_seqs serve speculative decoding.
    top = min(max_batch * 2, 512)
    sizes = [c for c in (1, 2, 4) if c <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    return sizes


def sglang(max_batch: int, gpu_over_80gb: bool = True) -> list[int]:
    # sgl-project/sglang, python/sglang/srt/model_executor/cuda_graph_runner.py (commit
    # 21514ff), get_batch_sizes_to_capture() without cuda_graph_bs, padding on, no speculative
    # decoding: [1, 2, 4, 8] + range(16, 161, 8), + range(160, 257, 8) on a GPU of more than
    # 80 GiB with dp_size 1 (an H200); if the largest exceeds req_to_token_pool.size (here the
    # maximum batch), add size - 1 and size; sorted, unique, at most size.
    sizes = [1, 2, 4, 8] + list(range(16, 161, 8))
    if gpu_over_80gb:
        sizes += list(range(160, 257, 8))
    if max(sizes) > max_batch:
        sizes += [max_batch - 1, max_batch]
    return [c for c in sorted(set(sizes)) if 0 < c <= max_batch]


def tgi(max_batch: int) -> list[int]:
    # huggingface/text-generation-inference, launcher/src/main.rs (commit db931fc): without
    # --cuda-graphs, `vec![1, 2, 4, 8, 16, 32]` whatever the maximum batch; a batch above 32
    # runs eagerly (server/.../flash_causal_lm.py: no captured size >= bs, no graph).
    return [1, 2, 4, 8, 16, 32]


def course(max_batch: int) -> list[int]:
    """tinyllm.graphs.default_capture_sizes, for comparison."""
    return list(default_capture_sizes(max_batch))


PRESETS = {"course": course, "vllm": vllm, "sglang": sglang, "tgi": tgi, "nano-vllm": nano_vllm}


def usable(sizes, max_batch: int) -> list[int]:
    """The sizes a decode of at most max_batch rows can replay: those below max_batch and
    the smallest one at or above it (larger ones are captured but never chosen)."""
    sizes = sorted(set(sizes))
    above = [c for c in sizes if c >= max_batch][:1]
    return [c for c in sizes if c < max_batch] + above


def for_course(sizes, max_batch: int) -> tuple[int, ...]:
    """A preset as the course's decoder takes it: the usable sizes below max_batch, and
    max_batch itself as the largest (its rows; capture_sizes must end there). Same graphs
    where a preset pads the full batch above it; one more where it stops short (TGI above 32
    rows, nano-vllm off a multiple of 16), which those engines run eagerly."""
    return (*[c for c in usable(sizes, max_batch) if c < max_batch], max_batch)


# --- padding on a workload, on the host ----------------------------------------------------


def workload(n_requests: int = 256, seed: int = 0) -> tuple[list[int], list[int]]:
    """The bench's engine workload (bench.measure_engine draws it the same way): prompt
    lengths 8-64 and new tokens 32-256 per request."""
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(8, 65, (n_requests,), generator=gen).tolist()
    news = torch.randint(32, 257, (n_requests,), generator=gen).tolist()
    return lens, news


def occupancy(news, n_slots: int) -> list[int]:
    """Rows in use at each decode step when PagedEngine(eos_id=None, min_admit=1) serves
    requests of news[i] new tokens, submitted in order: before each step every free slot
    takes the next queued request (FIFO). The host reads each step's ids one step late, so a
    request of n new tokens runs in n steps: its prefill gives the first, n - 1 steps the rest, and
    one more step runs before its end is seen (that token is dropped); then its row is free.
    Compaction keeps the requests in the first rows, so the rows in use are the running
    requests."""
    queue, running, trace = deque(news), [], []
    while queue or running:
        while queue and len(running) < n_slots:
            running.append(queue.popleft())
        trace.append(len(running))
        running = [n - 1 for n in running if n > 1]
    return trace


def capture_size_for(rows: int, sizes) -> int | None:
    """The capture size a step of `rows` rows replays (the engine's rule, bucket_for: the
    smallest size that holds them), or None above the largest (that step runs eagerly)."""
    sizes = tuple(sorted(set(sizes)))
    return bucket_for(rows, sizes) if rows <= sizes[-1] else None


def padding(trace, sizes) -> dict:
    """Each step of `trace` (rows in use) padded to its capture size: the graphs, the padded
    rows over all rows the graphs computed (waste_share), and the size each step used."""
    sizes = sorted(set(sizes))
    used = [capture_size_for(n, sizes) for n in trace]
    graphed = [(n, c) for n, c in zip(trace, used) if c is not None]
    rows = sum(c for _, c in graphed)
    padded = sum(c - n for n, c in graphed)
    return {
        "capture_sizes": sizes,
        "graphs": len(sizes),
        "graphs_used": len({c for c in used if c is not None}),
        "steps": len(trace),
        "eager_steps": used.count(None),
        "rows": rows,
        "padded_rows": padded,
        "waste_share": round(padded / rows, 4) if rows else 0.0,
        "steps_per_size": {str(c): k for c, k in sorted(Counter(c for c in used if c).items())},
        "capture_size_per_step": used,
    }


def compare_presets(n_slots: int = 32, n_requests: int = 256, seed: int = 0) -> dict:
    """Every preset on the bench's engine workload: the sizes each engine captures and the
    padding of the sizes a decode of at most n_slots rows uses."""
    _, news = workload(n_requests, seed)
    trace = occupancy(news, n_slots)
    out = {"n_slots": n_slots, "n_requests": n_requests, "n_tokens": sum(news),
           "steps": len(trace), "mean_rows": round(sum(trace) / len(trace), 2),
           "rows_per_step": trace, "presets": {}}  # fmt: skip
    for name, preset in PRESETS.items():
        captured = preset(n_slots)
        row = padding(trace, usable(captured, n_slots))
        row["captured_by_engine"] = sorted(set(captured))
        out["presets"][name] = row
    return out


# --- measured on a GPU ---------------------------------------------------------------------


MEASURED_ON_CUDA = {
    "bytes": "lab.timing.pool_bytes of the decoder's pool, after each capture",
    "seconds": "each size captured alone (Graphs.capture), summed (CUDA synchronised)",
}
SIMULATED = {
    "bytes": "None: simulated graphs share no pool (lab.simgraph)",
    "seconds": "CPU seconds of simulated captures: nothing a GPU would take",
}


@torch.no_grad()
def capture_in_order(model, n_slots, max_len, sizes, order, graph_api) -> tuple[float, list]:
    """A fresh paged engine's graphs for `sizes`, captured one by one into its pool in
    `order` ("largest_first", as capture() does, or "smallest_first"): the seconds the
    captures took, and the pool's bytes after each (None each without CUDA)."""
    engine = PagedEngine(model, n_slots, max_len=max_len, use_graph=True, graph_api=graph_api,
                         capture_sizes=tuple(sizes), prefill_graphs=False)  # fmt: skip
    graphs, seconds, after = engine.decode_graphs, 0.0, []
    for c in sorted(sizes, reverse=order == "largest_first"):
        graph_api.synchronize()
        t0 = time.perf_counter()
        graphs.capture(c, engine.decode, engine.cache)
        graph_api.synchronize()
        seconds += time.perf_counter() - t0
        after.append(pool_bytes(graphs.pool) if graph_api is torch.cuda else None)
    return seconds, after


def estimates(after: list) -> dict:
    """From the pool's bytes after each capture, largest first: the largest graph alone (the
    first capture into a fresh pool), the linear estimate (it × the number of graphs), and
    vLLM's profiler's (the first, plus the second's increment for each graph after it)."""
    keys = ("largest_alone_pool_bytes", "linear_estimate_bytes", "vllm_profiler_estimate_bytes")
    if after[0] is None:
        return dict.fromkeys(keys)
    step = after[1] - after[0] if len(after) > 1 else 0
    return dict(zip(keys, (after[0], after[0] * len(after), after[0] + step * (len(after) - 1))))


def measure(model, n_slots: int = 32, max_len: int = 512, graph_api=torch.cuda,
            presets=None) -> dict:  # fmt: skip
    """Each preset's graphs (as for_course gives them) captured into one shared pool,
    largest first and smallest first: seconds, and the pool's bytes after each capture
    (lab.timing.pool_bytes, as the bench measures pools). Beside the shared pool, two
    estimates made from single graphs: the largest graph's pool × the number of graphs, and
    vLLM's profiler's (issue #45178: the first graph, plus the second's increment × the
    graphs after the first). First an untimed capture of the course's sizes, so that no
    preset pays for loading kernels. With graph_api=lab.simgraph (a CPU) the keys are the
    same, every byte count is None and the seconds mean nothing: simulated graphs share no
    pool and replay saves no launch."""
    presets = PRESETS if presets is None else presets
    on_cuda = graph_api is torch.cuda
    capture_in_order(
        model, n_slots, max_len, default_capture_sizes(n_slots), "largest_first", graph_api
    )  # fmt: skip  (warm-up)
    out = {"n_slots": n_slots, "max_len": max_len, "graph_api": graph_api.__name__,
           "presets": {}} | (MEASURED_ON_CUDA if on_cuda else SIMULATED)  # fmt: skip
    for name, preset in presets.items():
        sizes = for_course(preset(n_slots), n_slots)
        row = {"capture_sizes": list(sizes), "graphs": len(sizes)}
        for order in ("largest_first", "smallest_first"):
            seconds, after = capture_in_order(model, n_slots, max_len, sizes, order, graph_api)
            row[f"{order}_capture_s"] = round(seconds, 4)
            row[f"{order}_pool_bytes_after_each"] = after
            row[f"{order}_pool_bytes"] = after[-1]
        row["shared_pool_bytes"] = row["largest_first_pool_bytes"]
        row |= estimates(row["largest_first_pool_bytes_after_each"])
        out["presets"][name] = row
        if on_cuda:
            torch.cuda.empty_cache()
    return out


def main(argv=None) -> dict:
    from tinyllm.lab.bench import provenance

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out", type=Path, help="the JSON file to write")
    p.add_argument("--n-slots", type=int, default=32)
    p.add_argument("--force", action="store_true", help="allow writing over an existing out")
    args = p.parse_args(argv)
    validate_outputs(p, args.force, {"out": args.out})
    if not torch.cuda.is_available():
        raise SystemExit(
            "tinyllm.lab.capture_policy measures graphs on a GPU and this machine has none; "
            "the padding arithmetic runs anywhere: capture_policy.compare_presets()"
        )
    argv = sys.argv[1:] if argv is None else argv
    res = {"provenance": provenance("python -m tinyllm.lab.capture_policy " + " ".join(argv))}
    res["padding"] = compare_presets(args.n_slots)
    t0 = time.perf_counter()
    res["measured"] = measure(load_pretrained("cuda"), args.n_slots)
    res["measured"]["seconds"] = round(time.perf_counter() - t0, 1)
    write_whole(args.out, lambda partial: Path(partial).write_text(json.dumps(res, indent=1)))
    print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()
