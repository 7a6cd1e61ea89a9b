"""GPU probe of the paged decode step against the windowed one, on the shipped model: replay
bit-identical to the eager step (paged, several block boundaries), and the replayed step's
time and kernels at batch 1 and 8, positions 32-75 and >= 1000, unfused and compiled."""

import json
import statistics
import time

import torch

from tinyllm import GraphDecoder, load_pretrained
from tinyllm.lab.prompts import prompt_batch
from tinyllm.lab.timing import kernel_summary, profile_steps, step_times


def emit(**row):
    print(json.dumps(row), flush=True)


def replayed_us(dec, idx, n_steps=40, repeats=5):
    tok = idx[:, -1:].clone()
    per = []
    for _ in range(repeats):
        dec.prefill(idx)
        per.append(
            statistics.median(
                step_times(lambda t: dec.step(t, check=False), tok, n_steps, warmup=2)
            )
        )
    dec.prefill(idx)
    k = kernel_summary(profile_steps(lambda t: dec.step(t, check=False), tok))
    return (
        round(statistics.median(per), 1),
        round(min(per), 1),
        round(max(per), 1),
        k["kernels"],
        round(k["kernel_us"], 1),
    )


def main():
    t0 = time.time()
    model = load_pretrained("cuda")
    # bit-exact: paged replay vs the paged step run eagerly, across block boundaries
    for B in (1, 3):
        idx = prompt_batch(B, 37, "cuda")
        g = GraphDecoder(model, B, kv="paged")
        e = GraphDecoder(model, B, kv="paged", use_graph=False)
        a, b = g.prefill(idx), e.prefill(idx)
        tok = b[:, -1:].argmax(-1)
        equal, n = True, 0
        for step in range(150):
            x, y = g.step(tok), e.step(tok)
            equal &= torch.equal(x, y)
            n += 1
            tok = y[:, -1].argmax(-1, keepdim=True)
        emit(kind="paged_bit_exact", B=B, steps=n, equal=bool(equal), graphs=sorted(g.graphs))
    # greedy agreement of paged and static at batch 8 over 256 steps
    idx = prompt_batch(8, 32, "cuda")
    s = GraphDecoder(model, 8)
    p = GraphDecoder(model, 8, kv="paged")
    ts, tp = s.generate(idx, 256), p.generate(idx, 256)
    emit(kind="paged_vs_static_tokens", agree=round((ts == tp).float().mean().item(), 4))
    for compile, batches in ((False, (1, 8)), (True, (1,))):
        for B in batches:
            for kv in ("static", "paged"):
                dec = GraphDecoder(model, B, kv=kv, compile=compile)
                short = prompt_batch(B, 32, "cuda")
                ts0 = time.time()
                dec.prefill(short)
                dec.capture()
                setup = round(time.time() - ts0, 2)
                us = replayed_us(dec, short)
                emit(
                    kind="step",
                    kv=kv,
                    compile=compile,
                    B=B,
                    positions="32-71",
                    us=us,
                    setup_s=setup,
                )
                long = prompt_batch(B, 1000, "cuda")
                us = replayed_us(dec, long, n_steps=20)
                emit(kind="step", kv=kv, compile=compile, B=B, positions="1000-1019", us=us)
    emit(
        kind="done",
        seconds=round(time.time() - t0, 1),
        torch=torch.__version__,
        gpu=torch.cuda.get_device_name(),
    )


if __name__ == "__main__":
    main()
