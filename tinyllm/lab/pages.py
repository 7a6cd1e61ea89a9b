"""The paged step measured, and its peers on equal footing (notebook 08, bench.py).

Equal footing: every step below is replayed from a CUDA graph with one token copy and one
launch per step, nothing else on the host (an ideal host): gpt-fast's compiled forward in a
graph captured by hand (gptfast.make_ideal_step), with generate.py's Inductor settings and
with the course's extra one (PDL); the course's windowed and paged steps, unfused and
compiled, their decoders' graphs replayed directly. Then the kernels, not the host, set
every time, and the ratio of two of them says which kernels are faster.

Also: the attention call alone against the number of keys (SDPA in the course's window form
and kernels.paged_decode_attention, each inside a graph, calls back to back); the paged step
against position, replayed alone (the windowed step climbs its bucket staircase, the paged
one should stay flat); every capture size's capture time and the pool they share; replay
against the eager paged step, bit for bit. All need CUDA.
"""

import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

from tinyllm import Engine, GraphDecoder, PagedEngine, kernels
from tinyllm.graphs import default_capture_sizes
from tinyllm.lab import engine_time, gptfast
from tinyllm.lab.peers import Variant, position_sweep
from tinyllm.lab.prompts import prompt_batch
from tinyllm.lab.timing import pool_bytes


def _clock() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()


def replayed(model, idx, name: str, kv: str = "static", compile=False, room: int = 96) -> Variant:
    """A GraphDecoder's step as an ideal host runs it: copy the token in, replay the graph of
    the step's key (its window, or its batch for kv="paged"), nothing else. reset() prefills
    idx again (and, paged, hands the rows the blocks of `room` more positions up front, since
    nothing between replays grows them)."""
    t0 = _clock()
    dec = GraphDecoder(model, idx.shape[0], kv=kv, compile=compile)

    def reset():
        dec.prefill(idx)
        if kv == "paged":
            dec.cache.rows.take(range(dec.batch), idx.shape[1] + room)

    reset()
    key = dec.graph_key()
    dec.capture((key,))
    setup_s = _clock() - t0

    def step(tok):
        dec.tok.copy_(tok)
        return dec.replay(key)

    return Variant(name, reset, step, idx[:, -1:].clone(), setup_s)


def ideal_gptfast(model, idx, max_new_tokens: int, name: str, extra=None) -> Variant:
    step, setup_s = gptfast.make_ideal_step(model, idx, max_new_tokens, extra_inductor=extra)
    return Variant(name, step.reset, step, idx[:, -1:].int(), setup_s)


def equal_footing(model, idx, extra: dict, max_new_tokens: int = 256) -> list[Variant]:
    """The steps compared on an ideal host (the module docstring), at idx's operating point:
    gpt-fast's cache of T + max_new_tokens positions, as generate.py sizes it for the bench."""
    pdl = ", ".join(f"{k}={v}" for k, v in extra.items())
    return [
        ideal_gptfast(model, idx, max_new_tokens, "gpt-fast, ideal host"),
        ideal_gptfast(model, idx, max_new_tokens, f"gpt-fast, ideal host, {pdl}", extra),
        replayed(model, idx, "graph, ideal host"),
        replayed(model, idx, "fused kernels in bucketed graphs, ideal host", compile=True),
        replayed(model, idx, "paged, ideal host", kv="paged"),
        replayed(model, idx, "paged fused, ideal host", kv="paged", compile=True),
    ]


def attention_times(lengths=(40, 128, 256, 512, 1024), batches=(1, 8), calls: int = 20,
                    repeats: int = 30, cfg=None) -> dict:  # fmt: skip
    """µs per call of decode attention alone, in a CUDA graph of `calls` calls back to back
    (the median of `repeats` replays): SDPA in the course's window form ((B·H_kv, 1, G, D)
    over a window of n keys, an additive bias), the paged kernels over n keys in blocks of
    16 (paged_decode_attention), and the paged step's fused op with its combine kernel
    (rope_write_attend: RoPE, the write of key n and the attention over n keys; at up to
    GEMV_ROWS rows the step runs its kernel alone, rope_write_splits, and combines in the
    output projection), for the shipped model's heads, in bf16. The fused op's table is as
    wide as the step's, max_seq_len / 16 blocks, whatever n: its form, sums of products or
    tensor cores, is then the step's (kernels.tensor_cores). A replay is launched first and
    the events go around a second one, launched while the first runs: while launching takes
    less than a replay's work, the window holds the GPU's work alone, not the launch's latency
    (notebook 11, Reference R.3)."""
    H, H_kv, D = (8, 4, 32) if cfg is None else (cfg.n_heads, cfg.n_kv_heads, cfg.head_dim)
    width = (1024 if cfg is None else cfg.max_seq_len) // 16  # the step's table, in blocks
    dev, dt, gen = "cuda", torch.bfloat16, torch.Generator(device="cuda").manual_seed(0)

    def per_call(fn) -> float:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        times = []
        for _ in range(repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            graph.replay()  # the timed replay's launch hides behind this one's work
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3 / calls)
        return round(statistics.median(times), 2)

    out = {"lengths": list(lengths), "calls": calls, "block_size": 16}
    for B in batches:
        sdpa, paged, fused = [], [], []
        for n in lengths:
            q = torch.randn(B * H_kv, 1, H // H_kv, D, device=dev, dtype=dt, generator=gen)
            k = torch.randn(B * H_kv, 1, n, D, device=dev, dtype=dt, generator=gen)
            v = torch.randn(B * H_kv, 1, n, D, device=dev, dtype=dt, generator=gen)
            bias = torch.zeros(B * H_kv, 1, 1, n, device=dev, dtype=dt)
            sdpa.append(per_call(partial(F.scaled_dot_product_attention, q, k, v, attn_mask=bias)))
            blocks = -(-n // 16)
            pool = torch.randn(B * blocks + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            table = (torch.arange(B * blocks, device=dev, dtype=torch.int32) + 1).view(B, blocks)
            lens = torch.full((B,), n, device=dev, dtype=torch.int32)
            qp = torch.randn(B, H, D, device=dev, dtype=dt, generator=gen)
            paged.append(
                per_call(partial(kernels.paged_decode_attention, qp, pool, pool, table, lens))
            )
            qkv = torch.randn(B, H + 2 * H_kv, D, device=dev, dtype=dt, generator=gen)
            angle = torch.rand(n, D // 2, device=dev, generator=gen)
            wide = torch.randn(B * width + 1, H_kv, 16, D, device=dev, dtype=dt, generator=gen)
            rows = (torch.arange(B * width, device=dev, dtype=torch.int32) + 1).view(B, width)
            fused.append(per_call(partial(
                kernels.rope_write_attend, qkv, angle.cos().to(dt), angle.sin().to(dt), wide,
                wide.clone(), rows, lens - 1)))  # fmt: skip
        out[str(B)] = {"sdpa_window_us": sdpa, "paged_kernel_us": paged, "fused_op_us": fused}
    return out


def walked(model, idx, name: str, compile=False) -> Variant:
    """The windowed GraphDecoder's step as an ideal host runs it, position after position:
    copy the token in, replay the graph of the window that holds the next key, move the host
    position. Every bucket's graph is captured up front."""
    t0 = _clock()
    dec = GraphDecoder(model, idx.shape[0], compile=compile)
    dec.prefill(idx)
    dec.capture()
    setup_s = _clock() - t0

    def step(tok):
        dec.tok.copy_(tok)
        out = dec.replay(dec.graph_key())
        dec.cache.advance_host()
        return out

    return Variant(name, lambda: dec.prefill(idx), step, idx[:, -1:].clone(), setup_s)


def paged_sweep(model, idx, bin_size: int = 16) -> dict:
    """The step against position, 32 to max_len - 1, for the windowed and the paged decoder,
    unfused and compiled, each step its graph replayed alone (walked() and replayed(): an
    ideal host, so the kernels set every time; the paged rows hold the blocks of every
    position up front): the mean step of each bin of bin_size positions, run back to back."""
    n = model.cfg.max_seq_len - idx.shape[1]
    out = {"positions": list(range(idx.shape[1], idx.shape[1] + n, bin_size)), "bin_size": bin_size}
    variants = (
        walked(model, idx, "windowed"),
        walked(model, idx, "windowed fused", compile=True),
        replayed(model, idx, "paged", kv="paged", room=n),
        replayed(model, idx, "paged fused", kv="paged", compile=True, room=n),
    )
    for v in variants:  # a bin's steps back to back: an event per step made the host the
        # slower side of a 47 µs step (results/gpu_checks/2026-12-03_3fdf1e2)
        out[f"{v.name}_us"] = [round(t, 1) for t in position_sweep(v, n, per=bin_size)]
    return out


def _bins(sweep: dict, short, long_from: int) -> tuple[list, list]:
    """The indices of the sweep's bins that start within `short`, and of those that start at
    long_from or later."""
    starts = sweep["positions"]
    return ([i for i, p in enumerate(starts) if short[0] <= p <= short[1]],
            [i for i, p in enumerate(starts) if p >= long_from])  # fmt: skip


def long_over_short(sweep: dict, name: str, short=(32, 75), long_from: int = 1000) -> float:
    """The median step of the bins that start at long_from or later over the median of those
    that start within `short` (bin_spans gives the positions they cover)."""
    s, ell = _bins(sweep, short, long_from)
    us = sweep[f"{name}_us"]
    return round(statistics.median(us[i] for i in ell) / statistics.median(us[i] for i in s), 3)


def bin_spans(sweep: dict, short=(32, 75), long_from: int = 1000) -> tuple[str, str]:
    """The positions long_over_short's short and long bins cover, as "first-last" each: a
    sweep's bins are named by their first position and hold bin_size positions."""
    size, starts = sweep["bin_size"], sweep["positions"]
    return tuple(
        f"{starts[b[0]]}-{starts[b[-1]] + size - 1}" for b in _bins(sweep, short, long_from)
    )


def capture_sizes(model, n_slots: int = 32, max_len: int = 512) -> dict:
    """The paged engine's graphs, one per default capture size, captured into one pool
    (largest first): seconds and the pool's bytes; and the same for the slot engine's
    buckets, beside it."""
    out = {"n_slots": n_slots, "capture_sizes": list(default_capture_sizes(n_slots))}
    paged = PagedEngine(model, n_slots, max_len=max_len, use_graph=True, prefill_graphs=False)
    slots = Engine(model, n_slots, max_len=max_len, use_graph=True)
    for kv, engine, graphs in (("paged", paged, paged.decode_graphs),
                               ("slots", slots, slots.decoder.graphs)):  # fmt: skip
        seconds = engine_time.capture(engine)
        out[kv] = {"capture_s": round(seconds, 3), "pool_bytes": pool_bytes(graphs.pool),
                   "graphs": sorted(graphs)}  # fmt: skip
    return out


@torch.no_grad()
def paged_exactness(model, steps: int = 200, batches=(1, 3, 8)) -> dict:
    """Replay against the same paged step run eagerly, bit for bit, batch by batch, from a
    37-token prompt (block boundaries every 16 positions) and again after a 900-token one
    (the graph captured at the first, replayed at the second); and the share of greedy
    tokens the paged step agrees on with the windowed step, over 256 steps at batch 8."""
    out = {"batches": list(batches), "steps": 0, "all_equal": True, "first_difference": None}
    for B in batches:
        graph = GraphDecoder(model, B, kv="paged")
        eager = GraphDecoder(model, B, kv="paged", use_graph=False)
        for T, n in ((37, steps), (900, min(steps, model.cfg.max_seq_len - 900))):
            idx = prompt_batch(B, T, "cuda")
            graph.prefill(idx)
            tok = eager.prefill(idx)[:, -1:].argmax(-1)
            for s in range(n):
                a, b = graph.step(tok), eager.step(tok)
                out["steps"] += 1
                if out["all_equal"] and not torch.equal(a, b):
                    out["all_equal"] = False
                    out["first_difference"] = {"batch": B, "prompt": T, "step": s}
                tok = b[:, -1].argmax(-1, keepdim=True)
    idx = prompt_batch(8, 32, "cuda")
    windowed = GraphDecoder(model, 8).generate(idx, 256)
    paged = GraphDecoder(model, 8, kv="paged").generate(idx, 256)
    out["greedy_agreement_with_windowed"] = round((windowed == paged).float().mean().item(), 4)
    return out
