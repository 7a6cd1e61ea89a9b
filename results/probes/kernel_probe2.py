"""Variants of the paged decode-attention kernel on the H200: two kernels (split, combine),
the same launched with PDL, and one kernel (the last split of each row and K/V head
combines, an atomic counter), with and without PDL. Correctness against the reference over
many random draws (a race shows as a moving error), then the per-call time in a graph."""

import json
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import kernel_v2 as V  # noqa: E402

from tinyllm import kernels as K  # noqa: E402

DEV, DT = "cuda", torch.bfloat16
H, H_KV, D = 8, 4, 32
CALLS = 20


def graph_time(fn, n_replays=30):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(n_replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / CALLS)
    return round(statistics.median(out), 2), round(min(out), 2)


def emit(**row):
    print(json.dumps(row), flush=True)


def inputs(B, BS, n, gen):
    max_blocks = 1024 // BS
    n_blocks = B * max_blocks + 1
    kc = torch.randn(n_blocks, H_KV, BS, D, device=DEV, dtype=DT, generator=gen)
    vc = torch.randn(n_blocks, H_KV, BS, D, device=DEV, dtype=DT, generator=gen)
    table = torch.randperm(n_blocks - 1, device=DEV, generator=gen)[: B * max_blocks]
    table = (table.view(B, max_blocks) + 1).int()
    lens = torch.randint(1, n + 1, (B,), device=DEV, generator=gen, dtype=torch.int32)
    lens[0] = n
    q = torch.randn(B, H, D, device=DEV, dtype=DT, generator=gen)
    return q, kc, vc, table, lens


VARIANTS = {
    "two": lambda *a, ns, nw: K.triton_paged_decode_attention(*a, n_splits=ns, num_warps=nw),
    "two_pdl": lambda *a, ns, nw: V.two_pdl(*a, n_splits=ns, num_warps=nw),
    "one": lambda *a, ns, nw: V.one(*a, n_splits=ns, num_warps=nw, pdl=False),
    "one_pdl": lambda *a, ns, nw: V.one(*a, n_splits=ns, num_warps=nw, pdl=True),
}


def main():
    t0 = time.time()
    gen = torch.Generator(device=DEV).manual_seed(0)
    for name, f in VARIANTS.items():
        worst, moved = 0.0, 0
        for trial in range(60):
            B, BS, n = (
                (1, 8)[trial % 2],
                (16, 32)[trial // 2 % 2],
                (1, 17, 128, 1000, 1024)[trial % 5],
            )
            q, kc, vc, table, lens = inputs(B, BS, n, gen)
            want = K.reference_paged_decode_attention(
                q.float(), kc.float(), vc.float(), table, lens
            )
            a = f(q, kc, vc, table, lens, ns=16, nw=2)
            b = f(q, kc, vc, table, lens, ns=16, nw=2)
            moved += not torch.equal(a, b)
            worst = max(worst, ((a.float() - want).norm() / want.norm()).item())
        emit(kind="checked", variant=name, worst_rel_err=worst, nondeterministic=moved)
    for name, f in VARIANTS.items():
        for B in (1, 8):
            for n in (40, 128, 1024):
                for BS in (16, 32):
                    q, kc, vc, table, lens = inputs(B, BS, n, gen)
                    lens.fill_(n)
                    for ns in (8, 16):
                        for nw in (2, 4):
                            emit(kind="time", variant=name, B=B, keys=n, BS=BS, splits=ns,
                                 warps=nw, us=graph_time(lambda: f(q, kc, vc, table, lens,
                                                                   ns=ns, nw=nw)))  # fmt: skip
    emit(kind="done", seconds=round(time.time() - t0, 1))


if __name__ == "__main__":
    main()
