"""lab.bench's measurements that need no GPU to check: the decoder timing loop of its hf and
sizes sections gives generate()'s tokens, and its Llama sizes are the sizes they are named for."""

import torch

from tinyllm import Limits, Transformer, generate
from tinyllm.lab import bench, engine_time


def test_the_graph_generate_loop_gives_generates_tokens(shipped_model):
    prompt = engine_time.workload(1)[0][0]
    row, ids = bench.graph_generate_us(shipped_model, prompt, 6, use_graph=False, runs=1)
    assert 0 < row["min"] <= row["us_per_token"]
    assert ids.tolist() == generate(shipped_model, torch.tensor([prompt]), 6)[0].tolist()


def test_the_llama_sizes_have_the_parameters_they_are_named_for():
    """Built on the meta device, nothing allocated. The course model keeps its own LM head,
    so a tied checkpoint's size counts the embedding twice here."""
    with torch.device("meta"):
        n = {name: Transformer(cfg, limits=Limits(params=2**31)).n_params()
             for name, cfg in bench.LLAMA_SIZES.items()}  # fmt: skip
    assert n["tiny (the shipped shape)"] == 3_280_128
    assert 135e6 < n["SmolLM2-135M"] < 170e6
    assert 360e6 < n["SmolLM2-360M"] < 420e6
    assert 1.2e9 < n["Llama-3.2-1B"] < 1.6e9
