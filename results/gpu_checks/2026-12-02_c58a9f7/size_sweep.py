"""H200: where graphs stop mattering. The course's model at Llama configurations of about
3 M (the shipped one's shape), 135 M (SmolLM2-135M's), 360 M (SmolLM2-360M's) and 1.2 B
(Llama-3.2-1B's) parameters, random weights, bf16: GraphDecoder(kv="paged") at batch 1,
generate() of 128 new tokens after a 32-token prompt, with graphs and without (eager), µs per
token (median of 5 runs, the first run of each warmed first); beside each, the bandwidth floor:
the weights' bytes over 4.8 TB/s (the H200's HBM3e peak)."""
import json, statistics, sys, time, torch
from tinyllm.config import ModelConfig
from tinyllm.graphs import GraphDecoder
from tinyllm.model import Transformer
from tinyllm.validate import Limits
CONFIGS = {
    "tiny (the shipped shape)": ModelConfig(),
    "SmolLM2-135M": ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, ffn_hidden=1536, max_seq_len=2048, rope_theta=100000.0),
    "SmolLM2-360M": ModelConfig(vocab_size=49152, d_model=960, n_layers=32, n_heads=15, n_kv_heads=5, ffn_hidden=2560, max_seq_len=2048, rope_theta=100000.0),
    "Llama-3.2-1B": ModelConfig(vocab_size=128256, d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_hidden=8192, max_seq_len=2048, rope_theta=500000.0),
}
limits = Limits(params=2**31, layers=64, seq_len=8192)
rows = []
for name, cfg in CONFIGS.items():
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Transformer(cfg, limits=limits).to(torch.bfloat16).eval()
    n_params = model.n_params()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    idx = torch.randint(0, cfg.vocab_size, (1, 32), device="cuda")
    res = {"name": name, "params": n_params, "weight_bytes": weight_bytes,
           "floor_us": round(weight_bytes / 4.8e12 * 1e6, 1), "config": cfg.to_dict()}
    for use_graph in (True, False):
        dec = GraphDecoder(model, 1, max_len=256, kv="paged", use_graph=use_graph, limits=limits)
        dec.generate(idx, 128)
        ts, outs = [], []
        for _ in range(5):
            torch.cuda.synchronize(); t0 = time.perf_counter()
            out = dec.generate(idx, 128)
            torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) / 128 * 1e6)
            outs.append(out)
        res["graph_us" if use_graph else "eager_us"] = round(statistics.median(ts), 1)
        res[("graph" if use_graph else "eager") + "_min_us"] = round(min(ts), 1)
        res[("graph" if use_graph else "eager") + "_tokens"] = outs[0][0].tolist()
        del dec
    res["tokens_equal"] = res.pop("graph_tokens") == res.pop("eager_tokens")
    res["graph_gain"] = round(res["eager_us"] / res["graph_us"], 2)
    rows.append(res)
    print(json.dumps({k: v for k, v in res.items() if k != "config"}), flush=True)
    del model; torch.cuda.empty_cache()
json.dump({"rows": rows}, open(sys.argv[1], "w"), indent=1)
