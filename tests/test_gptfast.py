"""tinyllm.lab.gptfast: gpt-fast's form of the course model computes the course's logits.

In fp32 on the CPU the two differ only in summation order (fused wqkv, interleaved RoPE
pairs, repeat_interleave instead of enable_gqa) and in gpt-fast's RoPE table, computed in fp32
where the course's comes from fp64: relative differences are ~3e-7; we allow 1e-5.
"""

import pytest
import torch

from tinyllm import KVCache, generate
from tinyllm.generation import decode_step, prefill
from tinyllm.lab import gptfast

RTOL = 1e-5


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def course_prefill_logits(model, idx):
    with torch.no_grad():
        return model(idx)[0]


def gptfast_prefill_logits(gf, idx, max_seq_length=None):
    gf.setup_caches(idx.shape[0], max_seq_length or idx.shape[1])
    with torch.no_grad():
        return gf(idx, torch.arange(idx.shape[1]))


@pytest.fixture
def idx():
    return torch.randint(0, 258, (2, 24))


def test_prefill_logits_equal_course(toy_model, idx):
    gf = gptfast.from_course(toy_model)
    assert rel_diff(gptfast_prefill_logits(gf, idx), course_prefill_logits(toy_model, idx)) < RTOL


def test_rope_permutation_is_needed(toy_model, idx, monkeypatch):
    monkeypatch.setattr(gptfast.model, "interleave_rope_rows", lambda w, n_heads, head_dim: w)
    gf = gptfast.from_course(toy_model)
    assert rel_diff(gptfast_prefill_logits(gf, idx), course_prefill_logits(toy_model, idx)) > 1e-3


def test_decode_steps_equal_course_eager_decode(toy_model, idx):
    n = 10
    step, _ = gptfast.make_forward_step(toy_model, idx, n, compile_mode=None)
    cache = KVCache(toy_model.cfg.n_layers)
    ref = prefill(toy_model, idx, cache)
    for _ in range(n):  # every position up to the last one the cache holds
        tok = ref[:, -1:].argmax(-1)
        ref = decode_step(toy_model, cache, tok)
        assert rel_diff(step(tok.int()), ref) < RTOL


def test_shipped_model_greedy_tokens_through_gptfast_sampling(shipped_model, doc_ids):
    idx = torch.tensor([doc_ids[1000:1032], doc_ids[5000:5032]])
    gf = gptfast.from_course(shipped_model)
    logits = gptfast_prefill_logits(gf, idx)
    assert rel_diff(logits, course_prefill_logits(shipped_model, idx)) < RTOL
    n = 16
    ref = generate(shipped_model, idx, n)  # greedy
    # temperature 0 becomes 1e-5 in logits_to_probs: the sampled token is the argmax
    step, _ = gptfast.make_decode_step(shipped_model, idx, n, compile_mode=None, temperature=0.0)
    tok, got = ref[:, :1].int(), []
    for _ in range(n - 1):
        tok, probs = step(tok)
        got.append(tok)
        assert probs.shape == (2, shipped_model.cfg.vocab_size)
    assert torch.equal(torch.cat(got, dim=1).long(), ref[:, 1:])


def test_caches_sized_as_generate_py(toy_model):
    gf = gptfast.from_course(toy_model)
    gf.setup_caches(max_batch_size=3, max_seq_length=21)
    cfg = toy_model.cfg
    kv = gf.layers[0].attention.kv_cache
    assert kv.k_cache.shape == (3, cfg.n_kv_heads, 24, cfg.head_dim)  # 21 rounded up to 8s
    assert gf.causal_mask.dtype == torch.bool
    assert torch.equal(gf.causal_mask, torch.ones(24, 24, dtype=torch.bool).tril())
    assert gf.freqs_cis.shape == (cfg.max_seq_len, cfg.head_dim // 2, 2)


def test_inductor_settings_are_restored():
    cfg = torch._inductor.config
    before = (cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names)
    flipped = {
        "coordinate_descent_tuning": not before[0],
        "triton.unique_kernel_names": not before[1],
    }
    with gptfast.inductor_settings(flipped):
        assert (cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names) == (
            not before[0],
            not before[1],
        )
    assert (cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names) == before
    with pytest.raises(RuntimeError), gptfast.inductor_settings(flipped):
        raise RuntimeError("inside")
    assert (cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names) == before
    with pytest.raises(ValueError, match="triton.no_such_setting"):
        with gptfast.inductor_settings({**flipped, "triton.no_such_setting": 1}):
            pass
    assert (cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names) == before


def test_unknown_extra_inductor_key_raises_before_any_work(toy_model, idx):
    with pytest.raises(ValueError, match="no_such_setting"):
        gptfast.make_decode_step(
            toy_model, idx, 4, compile_mode=None, extra_inductor={"no_such_setting": True}
        )


def test_stepping_past_the_cache_raises(toy_model, idx):
    step, _ = gptfast.make_decode_step(toy_model, idx, 3, compile_mode=None)
    tok = idx[:, -1:].int()
    for _ in range(3):
        step(tok)
    with pytest.raises(ValueError, match="max_new_tokens 3"):
        step(tok)
    short = idx[:, :23]  # a cache of 23 + 1 = 24 positions, a multiple of 8: no slack at all
    step, _ = gptfast.make_forward_step(toy_model, short, 1, compile_mode=None)
    step(tok)
    with pytest.raises(ValueError, match="max_new_tokens 1"):
        step(tok)
    with pytest.raises(ValueError, match="block_size 256"):
        gptfast.make_decode_step(toy_model, idx, 256 - idx.shape[1] + 1, compile_mode=None)


def test_step_refuses_a_token_that_would_recompile(toy_model, idx):
    step, _ = gptfast.make_forward_step(toy_model, idx, 3, compile_mode=None)
    with pytest.raises(ValueError, match="int32"):
        step(idx[:, -1:])  # int64


def test_logits_to_probs_keeps_top_k():
    probs = gptfast.logits_to_probs(torch.randn(3, 258), temperature=0.8, top_k=200)
    assert ((probs > 0).sum(-1) == 200).all()
    assert torch.allclose(probs.sum(-1), torch.ones(3))


def test_decode_one_token_compiles_as_one_graph(toy_model, idx):
    """fullgraph=True fails on any graph break, error_on_recompile on a second graph: the
    step that generate.py compiles is one graph for every position."""
    gf = gptfast.from_course(toy_model)
    gf.setup_caches(idx.shape[0], idx.shape[1] + 5)
    kwargs = {"temperature": gptfast.TEMPERATURE, "top_k": gptfast.TOP_K}
    first = gptfast.prefill(gf, idx, torch.arange(idx.shape[1]), **kwargs)
    runs = []
    torch._dynamo.reset()
    try:
        for decode in (
            gptfast.decode_one_token,
            torch.compile(gptfast.decode_one_token, backend="eager", fullgraph=True),
        ):
            torch.manual_seed(7)
            pos = torch.tensor([idx.shape[1]], dtype=torch.int)
            with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
                runs.append(gptfast.decode_n_tokens(decode, gf, first.clone(), pos, 5, **kwargs))
            assert pos.item() == idx.shape[1] + 5
    finally:
        torch._dynamo.reset()
    (eager_toks, eager_probs), (comp_toks, comp_probs) = runs
    assert all(torch.equal(a, b) for a, b in zip(eager_toks, comp_toks))
    assert all(torch.equal(a, b) for a, b in zip(eager_probs, comp_probs))


@pytest.mark.cuda
def test_reduce_overhead_step_on_gpu(doc_ids):
    """generate.py's compiled step on a GPU: no cudagraph skips, logits near the eager ones."""
    from torch._dynamo.utils import counters

    from tinyllm import load_pretrained

    model = load_pretrained("cuda")
    idx = torch.tensor([doc_ids[1000:1032]], device="cuda")
    n = 24
    ref, _ = gptfast.make_forward_step(model, idx, n, compile_mode=None)
    torch._dynamo.reset()
    counters.clear()
    try:
        fast, setup_s = gptfast.make_forward_step(model, idx, n)
        tok = idx[:, -1:].int()
        for _ in range(n):
            a, b = fast(tok).float(), ref(tok).float()
            assert rel_diff(a, b) < 2e-2  # bf16, different kernels
            tok = b[:, -1:].argmax(-1).int()
        skips = sum(v for k, v in counters["inductor"].items() if "cudagraph_skip" in k)
        assert skips == 0
        torch._dynamo.reset()
        step, _ = gptfast.make_decode_step(model, idx, n)
        tok = idx[:, -1:].int()
        for _ in range(n):
            tok, probs = step(tok)
        assert 0 <= int(tok.min()) and int(tok.max()) < model.cfg.vocab_size
    finally:
        torch._dynamo.reset()


def test_each_build_compiles_its_own_copy():
    """Dynamo keeps compiled graphs per code object: a second torch.compile of the same
    function reuses the first graph (so a second build's Inductor settings and static
    addresses would never apply), and own_copy gives each build a graph of its own."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x):
        return x * 2 + 1

    x = torch.ones(3)
    torch._dynamo.reset()
    try:
        torch.compile(f, backend=counting)(x)
        torch.compile(f, backend=counting)(x)
        assert len(graphs) == 1  # the second build reused the first one's graph
        torch.compile(gptfast.own_copy(f), backend=counting)(x)
        torch.compile(gptfast.own_copy(f), backend=counting)(x)
        assert len(graphs) == 3  # each copy compiled anew
        assert gptfast.own_copy(f)(x).equal(f(x))
    finally:
        torch._dynamo.reset()


@pytest.mark.cuda
def test_the_ideal_host_step_outlives_the_memory_it_reads(doc_ids):
    """make_ideal_step's graph reads gpt-fast's weights and cache: with the caching
    allocator's free memory handed back and reused, its logits still follow the eager ones."""
    import gc

    from tinyllm import load_pretrained

    model = load_pretrained("cuda")
    idx = torch.tensor([doc_ids[1000:1032]], device="cuda")
    ref, _ = gptfast.make_forward_step(model, idx, 16, compile_mode=None)
    torch._dynamo.reset()
    try:
        step, _ = gptfast.make_ideal_step(model, idx, 16)
        gc.collect()
        torch.cuda.empty_cache()
        junk = torch.full((64, 2**20), float("nan"), device="cuda")  # reuses what was freed
        tok = idx[:, -1:].int()
        for _ in range(16):
            a, b = step(tok).float(), ref(tok).float()
            assert rel_diff(a, b) < 2e-2  # bf16, different kernels
            tok = b[:, -1:].argmax(-1).int()
        torch.cuda.synchronize()
        del junk
    finally:
        torch._dynamo.reset()
