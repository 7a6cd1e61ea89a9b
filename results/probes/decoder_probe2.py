"""The paged decode step on the shipped model with each kernel variant swapped in (the custom
op's CUDA kernel calls kernels.triton_paged_decode_attention, looked up at each call):
replayed step time and kernels at batch 1, positions 32-71 and 1000-1019, unfused and
compiled; and the paged replay bit-identical to its eager step for the one-kernel variant."""

import json
import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import kernel_v2 as V  # noqa: E402

from tinyllm import GraphDecoder, kernels, load_pretrained  # noqa: E402
from tinyllm.lab.prompts import prompt_batch  # noqa: E402
from tinyllm.lab.timing import kernel_summary, profile_steps, step_times  # noqa: E402

TWO = kernels.triton_paged_decode_attention


def emit(**row):
    print(json.dumps(row), flush=True)


def replayed_us(dec, idx, n_steps=40, repeats=5):
    tok = idx[:, -1:].clone()
    per = []
    for _ in range(repeats):
        dec.prefill(idx)
        per.append(statistics.median(
            step_times(lambda t: dec.step(t, check=False), tok, n_steps, warmup=2)))  # fmt: skip
    dec.prefill(idx)
    k = kernel_summary(profile_steps(lambda t: dec.step(t, check=False), tok))
    return [round(statistics.median(per), 1), round(min(per), 1), round(max(per), 1),
            k["kernels"], round(k["kernel_us"], 1)]  # fmt: skip


VARIANTS = {
    "two": lambda *a: TWO(*a, n_splits=16, num_warps=2),
    "two_pdl": lambda *a: V.two_pdl(*a, n_splits=16, num_warps=2),
    "one": lambda *a: V.one(*a, n_splits=16, num_warps=2, pdl=False),
    "one_pdl": lambda *a: V.one(*a, n_splits=16, num_warps=2, pdl=True),
}


def main():
    t0 = time.time()
    model = load_pretrained("cuda")
    for name, f in VARIANTS.items():
        kernels.triton_paged_decode_attention = lambda q, k, v, t, n, f=f: f(q, k, v, t, n)
        idx = prompt_batch(3, 37, "cuda")
        g, e = (
            GraphDecoder(model, 3, kv="paged"),
            GraphDecoder(model, 3, kv="paged", use_graph=False),
        )
        g.prefill(idx)
        tok = e.prefill(idx)[:, -1:].argmax(-1)
        equal = True
        for _ in range(100):
            x, y = g.step(tok), e.step(tok)
            equal &= torch.equal(x, y)
            tok = y[:, -1].argmax(-1, keepdim=True)
        emit(kind="bit_exact", variant=name, equal=bool(equal))
        for compile in (False, True) if name in ("two", "one_pdl") else (False,):
            torch._dynamo.reset()
            dec = GraphDecoder(model, 1, kv="paged", compile=compile)
            ts = time.time()
            dec.prefill(prompt_batch(1, 32, "cuda"))
            dec.capture()
            setup = round(time.time() - ts, 1)
            emit(kind="step", variant=name, compile=compile, positions="32-71",
                 us=replayed_us(dec, prompt_batch(1, 32, "cuda")), setup_s=setup)  # fmt: skip
            emit(kind="step", variant=name, compile=compile, positions="1000-1019",
                 us=replayed_us(dec, prompt_batch(1, 1000, "cuda"), n_steps=20))  # fmt: skip
    emit(kind="done", seconds=round(time.time() - t0, 1))


if __name__ == "__main__":
    main()
