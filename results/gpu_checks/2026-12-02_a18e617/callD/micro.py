"""Single CUDA calls the paged step issues, on this host (µs a call, 2,000 calls)."""
import json, time, numpy as np, torch
def tm(f, k=2000):
    f(); torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(k): f()
    el = (time.perf_counter() - t) / k * 1e6; torch.cuda.synchronize(); return round(el, 2)
ids = torch.zeros(256, dtype=torch.long, device="cuda")
x = np.arange(256 * 37, dtype=np.int64); flat = torch.zeros(256 * 37, dtype=torch.long, device="cuda")
tok = torch.zeros(256, 1, dtype=torch.long, device="cuda")
print(json.dumps({
    "torch.cuda.Event()+record": tm(lambda: torch.cuda.Event().record()),
    "torch.Event(cuda)+record": tm(lambda: torch.Event(ids.device).record()),
    "ids.to(cpu, non_blocking)": tm(lambda: ids.to("cpu", non_blocking=True, copy=True)),
    "copy_from_host 256 rows (as_tensor+pin_memory+copy_)": tm(lambda: flat.copy_(torch.as_tensor(x).pin_memory(), non_blocking=True)),
    "tok.clone": tm(lambda: tok.clone()),
}))
