"""GPU probe for the paged decode-attention kernel (tinyllm/kernels.py, imported as `kernels`
from this folder): correctness against the reference in bf16, and the per-call time inside a
CUDA graph (CALLS calls back to back, replayed), beside SDPA in the course's window form, SDPA
over a gathered window and FlexAttention. One JSON line per result."""

import json
import statistics
import time

import torch
import torch.nn.functional as F

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


def paged_inputs(B, BS, n):
    max_blocks = 1024 // BS
    n_blocks = B * max_blocks + 1
    kc = torch.randn(n_blocks, H_KV, BS, D, device=DEV, dtype=DT)
    vc = torch.randn_like(kc)
    table = torch.randperm(n_blocks - 1, device=DEV)[: B * max_blocks].view(B, max_blocks) + 1
    lens = torch.full((B,), n, dtype=torch.int32, device=DEV)
    q = torch.randn(B, H, D, device=DEV, dtype=DT)
    return q, kc, vc, table.int(), lens


def main():
    torch.manual_seed(0)
    t0 = time.time()
    worst = 0.0
    for B in (1, 8):
        for BS in (16, 32):
            for n in (1, 17, 128, 1000, 1024):
                q, kc, vc, table, lens = paged_inputs(B, BS, n)
                lens[0] = max(1, n - 5)  # rows of different lengths
                want = K.reference_paged_decode_attention(q.float(), kc.float(), vc.float(),
                                                          table, lens)  # fmt: skip
                for ns in (4, 8, 16):
                    got = K.triton_paged_decode_attention(q, kc, vc, table, lens, n_splits=ns)
                    err = ((got.float() - want).norm() / want.norm()).item()
                    worst = max(worst, err)
                    if not err < 1e-2:
                        emit(kind="FAIL", B=B, BS=BS, n=n, splits=ns, err=err)
                op = K.paged_decode_attention(q, kc, vc, table, lens)  # the custom op
                again = K.paged_decode_attention(q, kc, vc, table, lens)
                if not torch.equal(op, again):
                    emit(kind="FAIL_nondeterministic", B=B, BS=BS, n=n)
    emit(kind="checked", worst_rel_err=worst)
    for B in (1, 8):
        for n in (40, 128, 256, 512, 1024):
            q = torch.randn(B * H_KV, 1, H // H_KV, D, device=DEV, dtype=DT)
            k = torch.randn(B * H_KV, 1, n, D, device=DEV, dtype=DT)
            v = torch.randn_like(k)
            bias = torch.zeros(B * H_KV, 1, 1, n, device=DEV, dtype=DT)
            bias[..., n // 2 :] = float("-inf")
            emit(
                kind="sdpa_window",
                B=B,
                keys=n,
                us=graph_time(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias)),
            )
            for BS in (16, 32):
                qp, kc, vc, table, lens = paged_inputs(B, BS, n)
                for ns in (4, 8, 16):
                    for nw in (1, 2, 4):
                        emit(
                            kind="paged_triton",
                            B=B,
                            keys=n,
                            BS=BS,
                            splits=ns,
                            warps=nw,
                            us=graph_time(
                                lambda: K.triton_paged_decode_attention(
                                    qp, kc, vc, table, lens, n_splits=ns, num_warps=nw
                                )
                            ),
                        )
                nb = (n + BS - 1) // BS

                def gathered():
                    rows = table[:, :nb].long()
                    kk = kc[rows].transpose(1, 2).reshape(B * H_KV, 1, nb * BS, D)
                    vv = vc[rows].transpose(1, 2).reshape(B * H_KV, 1, nb * BS, D)
                    return F.scaled_dot_product_attention(
                        q, kk, vv, attn_mask=bias[..., :1].expand(-1, -1, -1, nb * BS)
                    )

                emit(kind="sdpa_gathered", B=B, keys=n, BS=BS, us=graph_time(gathered))
    try:  # FlexAttention's decoding path, over a contiguous cache with the length as a mask
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        flex = torch.compile(flex_attention, dynamic=False)
        for B in (1, 8):
            for n in (128, 1024):
                qf = torch.randn(B, H, 1, D, device=DEV, dtype=DT)
                kf = torch.randn(B, H_KV, 1024, D, device=DEV, dtype=DT)
                vf = torch.randn_like(kf)
                lens_dev = torch.full((B,), n, device=DEV)

                def keep(b, h, q_idx, kv_idx):
                    return kv_idx < lens_dev[b]

                bm = create_block_mask(keep, B, None, 1, 1024, device=DEV)
                emit(
                    kind="flex",
                    B=B,
                    keys=n,
                    us=graph_time(lambda: flex(qf, kf, vf, block_mask=bm, enable_gqa=True)),
                )
    except Exception as e:  # noqa: BLE001
        emit(kind="flex_failed", error=repr(e)[:300])
    emit(
        kind="done",
        seconds=round(time.time() - t0, 1),
        torch=torch.__version__,
        gpu=torch.cuda.get_device_name(),
    )


if __name__ == "__main__":
    main()
