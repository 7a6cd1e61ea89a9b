"""On the H200: the paged kernel's door. Bad shapes refused before launch; bad values refused
with TINYLLM_CHECK_KERNEL_VALUES (set in this process), the context still usable after; the
eager op's time per call with and without the door; the shipped model's paged step replayed
from a graph (the door runs at capture only) against the same step captured without it."""
import json, time, torch
from tinyllm import kernels, load_pretrained
res = {}
B, H, H_kv, D, bs, nb = 8, 4, 2, 32, 16, 65
q = torch.randn(B, H, D, device="cuda", dtype=torch.bfloat16)
k = torch.randn(nb, H_kv, bs, D, device="cuda", dtype=torch.bfloat16); v = torch.randn_like(k)
table = torch.randint(1, nb, (B, 8), device="cuda", dtype=torch.int32)
lens = torch.randint(1, 128, (B,), device="cuda", dtype=torch.int32)
good = kernels.paged_decode_attention(q, k, v, table, lens)
bad = {"fp32 q": (q.float(), k, v, table, lens), "head_dim": (q[..., :16], k, v, table, lens),
       "heads": (q[:, :3], k, v, table, lens), "table on cpu": (q, k, v, table.cpu(), lens)}
out = {}
for name, args in bad.items():
    try:
        kernels.paged_decode_attention(*args); out[name] = "accepted"
    except ValueError as e:
        out[name] = "ValueError: " + str(e)[:100]
kernels.CHECK_VALUES = True
for name, (t, l) in {"block 10**6": (table.index_fill(1, torch.tensor([0], device="cuda"), 10**6), lens),
                     "length 2**20": (table, lens.index_fill(0, torch.tensor([0], device="cuda"), 2**20)),
                     "length 0": (table, lens.index_fill(0, torch.tensor([0], device="cuda"), 0))}.items():
    try:
        kernels.paged_decode_attention(q, k, v, t, l); out[name] = "accepted"
    except ValueError as e:
        out[name] = "ValueError: " + str(e)[:100]
kernels.CHECK_VALUES = False
again = kernels.paged_decode_attention(q, k, v, table, lens); torch.cuda.synchronize()
out["context usable after, same output"] = bool(torch.equal(again, good))
res["refused"] = out
def per_call(n=2000):
    for _ in range(50): kernels.paged_decode_attention(q, k, v, table, lens)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): kernels.paged_decode_attention(q, k, v, table, lens)
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e6
door = kernels.check_paged_args
rounds = []
for r in range(3):
    kernels.check_paged_args = door; a = per_call()
    kernels.check_paged_args = lambda *x, **y: None; b = per_call()
    rounds.append({"eager_call_us_with_door": round(a, 2), "without": round(b, 2)})
kernels.check_paged_args = door
res["eager_op"] = rounds
# the shipped model's paged step in a graph (8 rows), captured with the door and without it,
# each replayed alone (lab.engine_time.replay_alone_us), interleaved, three rounds
from tinyllm import PagedEngine
from tinyllm.lab import engine_time
model = load_pretrained("cuda")
steps = []
for r in range(3):
    for with_door in (True, False):
        kernels.check_paged_args = door if with_door else (lambda *x, **y: None)
        e = PagedEngine(model, 8, max_len=512, prefill_graphs=False)
        e.capture()
        steps.append({"round": r, "door": with_door, "replay_alone_us": round(engine_time.replay_alone_us(e, 8), 2)})
        del e
kernels.check_paged_args = door
res["paged_step_replayed"] = steps
print(json.dumps(res, indent=1))
