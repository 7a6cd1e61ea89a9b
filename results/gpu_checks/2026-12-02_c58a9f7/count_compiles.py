"""H200: how many times PagedEngine(compile=True) compiles its step in capture() at 32 rows
(capture sizes 1, 2, 4, 8, 16, 24, 32, largest first): dynamo's count of compiled graphs."""
import time, torch
from torch._dynamo.utils import counters
from tinyllm import load_pretrained, PagedEngine
model = load_pretrained("cuda")
engine = PagedEngine(model, 32, max_len=512, compile=True)
t0 = time.perf_counter()
engine.capture()
print("capture sizes", engine.capture_sizes, "capture and compile s", round(time.perf_counter() - t0, 1))
print("dynamo stats", dict(counters["stats"]), "frames", dict(counters["frames"]))
