"""compile=True: the step's kernels come from torch.compile, the graphs are still the
project's (one per bucket, one pool). Replay must equal the same fused step run eagerly,
bit for bit. Marked cuda: skipped where torch sees no GPU."""

import pytest
import torch

from tinyllm import GraphDecoder, PagedEngine, SlotGraphDecoder, SlotKVCache, load_pretrained
from tinyllm.generation import prefill

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu_model():
    return load_pretrained(device="cuda")


@pytest.mark.parametrize("batch", [1, 4])
def test_compiled_replay_equals_the_fused_step_run_eagerly(gpu_model, batch):
    buckets = (64, 128, 256)  # small buckets: three windows compiled, two boundaries crossed
    graph = GraphDecoder(gpu_model, batch, max_len=256, buckets=buckets, compile=True)
    eager = GraphDecoder(
        gpu_model, batch, max_len=256, buckets=buckets, compile=True, use_graph=False
    )
    idx = torch.randint(
        0, 256, (batch, 40), device="cuda", generator=torch.Generator("cuda").manual_seed(batch)
    )
    tok = eager.prefill(idx)[:, -1:].argmax(-1)
    graph.prefill(idx)
    for step in range(256 - 40):
        e, g = eager.step(tok), graph.step(tok)
        assert torch.equal(e, g), f"step {step}: max |diff| {(e - g).abs().max().item():.3g}"
        tok = e[:, -1:].argmax(-1)
    assert sorted(graph.graphs) == [64, 128, 256]


def test_compiled_slot_replay_equals_the_fused_slot_step(gpu_model):
    caches = [SlotKVCache(gpu_model.cfg.n_layers, 4, 128, "cuda") for _ in range(2)]
    graph = SlotGraphDecoder(gpu_model, caches[0], buckets=(64, 128), compile=True)
    eager = SlotGraphDecoder(gpu_model, caches[1], buckets=(64, 128), compile=True, use_graph=False)
    prompts = [list(range(65, 65 + n)) for n in (5, 30, 12)]
    for slot, p in enumerate(prompts):
        for c in caches:
            prefill(gpu_model, torch.tensor([p], device="cuda"), c.prefilling(slot))
    tok = torch.full((4, 1), 97, device="cuda")
    for step in range(60):
        if step == 20:  # a release mid-stream
            for c in caches:
                c.release(1)
        e, g = eager.step(tok), graph.step(tok)
        assert torch.equal(e, g), f"step {step}"
        assert caches[0].lens == caches[0].lens_dev.tolist() == caches[1].lens
        tok = e[:, -1:].argmax(-1)


def test_the_compiled_paged_engine_replays_what_it_runs_eagerly(gpu_model):
    """compile=True in the engine: one compile with the batch dynamic serves its capture
    sizes (graphs.ENGINE_COMPILE). Its graphs give the tokens its eager steps give, greedy and
    seeded, with rows joining and leaving (every capture size met)."""
    prompts = [list(range(65, 65 + n)) for n in (5, 30, 12, 7, 22, 3, 9, 17, 11, 26)]
    outs = []
    for use_graph in (False, True):
        engine = PagedEngine(gpu_model, 8, max_len=128, use_graph=use_graph, compile=True)
        rids = [engine.submit(p, 10 + 3 * i, **({"temperature": 0.8, "seed": i} if i % 2 else {}))
                for i, p in enumerate(prompts)]  # fmt: skip
        out = engine.run()
        outs.append([out[r] for r in rids])
    assert outs[0] == outs[1]
    assert sorted(engine.decode_graphs) == [1, 2, 4, 8]
