"""H200: Hugging Face transformers as a peer, on the same weights (tinyllm.lab.hf.to_hf of the
shipped model, bf16), in one process. (1) generate() at batch 1, 256 new tokens, greedy, with
the static cache and CompileConfig(fullgraph=True, mode="reduce-overhead") as HF's docs give
it, against GraphDecoder(kv="paged").generate with compile False and True: µs per token,
median of 3 timed runs after 2 warm ones. (2) continuous batching on the bench's engine
workload (engine_time.workload(256): each request its own max_new_tokens, greedy, no eos),
through the documented manager (continuous_batching_context_manager, warmup=True), with
ContinuousBatchingConfig defaults, then use_cuda_graph=True and use_async_batching=True, then
those and default_compile_level=1: tok/s of a second run; against PagedEngine(overlap=True)
at 32 and 256 rows after capture(); the share of requests whose greedy tokens equal the
course engine's."""
import json, statistics, sys, time, torch, transformers
from transformers import CompileConfig, ContinuousBatchingConfig, GenerationConfig
from tinyllm import GraphDecoder, PagedEngine, load_pretrained
from tinyllm.lab import engine_time
from tinyllm.lab.hf import to_hf
model = load_pretrained("cuda")
hf = to_hf(model).eval()
out = {"transformers": transformers.__version__, "torch": torch.__version__, "generate": {}, "engine": {}}
prompt = engine_time.workload(1)[0][0]
idx = torch.tensor([prompt], device="cuda")
def timed(fn, n_new, warm=2, reps=3):
    for _ in range(warm): fn()
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize(); t0 = time.perf_counter(); r = fn(); torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / n_new * 1e6)
    return {"us_per_token": round(statistics.median(ts), 1), "min": round(min(ts), 1)}, r
t0 = time.perf_counter()
res, hf_ids = timed(lambda: hf.generate(idx, max_new_tokens=256, do_sample=False, cache_implementation="static",
                                    compile_config=CompileConfig(fullgraph=True, mode="reduce-overhead"),
                                    pad_token_id=257, eos_token_id=None), 256)
res["wall_s_with_warm"] = round(time.perf_counter() - t0, 1)
out["generate"]["hf static + CompileConfig(reduce-overhead, fullgraph)"] = res; print("hf generate", res, flush=True)
for compile in (False, True):
    dec = GraphDecoder(model, 1, max_len=512, kv="paged", compile=compile)
    t0 = time.perf_counter()
    res, ids = timed(lambda: dec.generate(idx, 256), 256)
    res["wall_s_with_warm"] = round(time.perf_counter() - t0, 1)
    res["tokens_equal_hf"] = ids[0].tolist() == hf_ids[0, idx.shape[1]:].tolist()
    out["generate"][f"course GraphDecoder(kv='paged', compile={compile})"] = res; print("course", compile, res, flush=True)
prompts, news = engine_time.workload(256)
course = {}
for n in (32, 256):
    e = PagedEngine(model, n, max_len=512, overlap=True); e.capture()
    engine_time.serve(e, prompts, news)
    done, s = engine_time.serve(e, prompts, news)
    course[n] = [done[r] for r in sorted(done)]
    out["engine"][f"course PagedEngine({n} rows, overlap=True)"] = {"tok_s": round(sum(news) / s, 1)}
    print("course engine", n, out["engine"][f"course PagedEngine({n} rows, overlap=True)"], flush=True)
def hf_cb(cfg):
    gen = GenerationConfig(do_sample=False, max_new_tokens=max(news), pad_token_id=257)
    runs = []
    with hf.continuous_batching_context_manager(generation_config=gen, continuous_batching_config=cfg,
                                                block=True, timeout=5, warmup=True) as manager:
        for _ in range(2):
            t0 = time.perf_counter()
            ids = [manager.add_request(p, max_new_tokens=m, eos_token_id=-1) for p, m in zip(prompts, news)]
            got = {}
            while len(got) < len(ids):
                r = manager.get_result(timeout=5)
                if r is not None and r.is_finished(): got[r.request_id] = r.generated_tokens
            runs.append((time.perf_counter() - t0, [got[i] for i in ids]))
    s, toks = runs[-1]
    agree = sum(a == b for a, b in zip(toks, course[32])) / len(toks)
    lens_ok = all(len(t) == m for t, m in zip(toks, news))
    return {"tok_s": round(sum(news) / s, 1), "first_run_tok_s": round(sum(news) / runs[0][0], 1),
            "greedy_share_equal_course": round(agree, 4), "lengths_as_asked": lens_ok}
for name, cfg in [("hf continuous batching, defaults", ContinuousBatchingConfig()),
                  ("hf continuous batching, use_cuda_graph + use_async_batching", ContinuousBatchingConfig(use_cuda_graph=True, use_async_batching=True)),
                  ("hf continuous batching, the same + default_compile_level=1", ContinuousBatchingConfig(use_cuda_graph=True, use_async_batching=True, default_compile_level=1))]:
    t0 = time.perf_counter()
    try:
        r = hf_cb(cfg)
    except Exception as ex:
        r = {"error": repr(ex)[:300]}
    r["wall_s"] = round(time.perf_counter() - t0, 1)
    out["engine"][name] = r; print(name, r, flush=True)
    json.dump(out, open(sys.argv[1], "w"), indent=1)
json.dump(out, open(sys.argv[1], "w"), indent=1)
