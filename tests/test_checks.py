"""Bad input: a ValueError that names the value and the limit, raised before any device work.

"Before any device work" is checked with a forward pre-hook on the model: the model must
not have been called when the error is raised (an out-of-range id that reached a CUDA
kernel would poison the whole process), and the decoders' state must be unchanged.
"""

import re

import pytest
import torch

from tinyllm import Engine, GraphDecoder, SlotGraphDecoder, SlotKVCache, StaticKVCache, generate
from tinyllm.generation import decode_step, prefill
from tinyllm.kv_cache import KVCache

V = 258  # vocab_size of every preset
MAX = 1024  # the shipped model's max_seq_len


@pytest.fixture
def model(shipped_model):
    """The shipped model with a counter of its forward calls."""
    calls = []
    handle = shipped_model.register_forward_pre_hook(lambda mod, args: calls.append(1))
    shipped_model.calls = calls
    yield shipped_model
    handle.remove()
    del shipped_model.calls


def ids(*shape, lo=0, hi=256):
    """Token ids of the given shape (fixed: also called while tests are collected)."""
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(0))


# --- generate ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, -300, V, V + 1, 10**6])
def test_generate_rejects_ids_outside_the_vocabulary(model, bad):
    idx = ids(2, 8)
    idx[1, 3] = bad
    with pytest.raises(
        ValueError, match=rf"idx holds token id {bad}, outside the vocabulary \[0, {V}\)"
    ):
        generate(model, idx, 4)
    assert not model.calls


@pytest.mark.parametrize("shape", [(1, 0), (0, 5), (0, 0)])
def test_generate_rejects_an_empty_prompt(model, shape):
    with pytest.raises(
        ValueError, match=rf"empty prompt: idx has shape \({shape[0]}, {shape[1]}\)"
    ):
        generate(model, torch.zeros(shape, dtype=torch.long), 4)
    assert not model.calls


@pytest.mark.parametrize("T, n", [(MAX + 1, 1), (MAX, 1), (1000, 25), (2, MAX - 1)])
def test_generate_refuses_to_run_past_max_seq_len(model, T, n):
    """No silent truncation: a prompt that does not fit is an error, not cut."""
    with pytest.raises(
        ValueError,
        match=rf"prompt length {T} \+ max_new_tokens {n} = {T + n} "
        rf"> max_len {MAX}",
    ):
        generate(model, ids(1, T), n)
    assert not model.calls


def test_generate_accepts_exactly_max_seq_len(model):
    out = generate(model, ids(1, MAX - 3), 3)
    assert out.shape == (1, 3)


@pytest.mark.parametrize(
    "pad_lens, shown",
    [
        (torch.tensor([0, 1, 2]), r"\(3,\)"),
        (torch.tensor([[0, 1]]), r"\(1, 2\)"),
        (torch.tensor(1), r"\(\)"),
        ([0, 1], "list"),
    ],
)
def test_generate_rejects_pad_lens_of_the_wrong_shape(model, pad_lens, shown):
    with pytest.raises(
        ValueError, match=rf"pad_lens must be a tensor of shape \(2,\), got {shown}"
    ):
        generate(model, ids(2, 6), 4, pad_lens=pad_lens)
    assert not model.calls


@pytest.mark.parametrize("pads, bad", [([0, 6], 6), ([9, 0], 9), ([-1, 0], -1)])
def test_generate_rejects_pad_lens_that_leave_no_token(model, pads, bad):
    with pytest.raises(
        ValueError,
        match=rf"pad_lens holds {bad}: each row needs 0 <= pads "
        r"< prompt length 6",
    ):
        generate(model, ids(2, 6), 4, pad_lens=torch.tensor(pads))
    assert not model.calls


def test_generate_rejects_float_pad_lens(model):
    with pytest.raises(ValueError, match="pad_lens must be integers, got dtype torch.float32"):
        generate(model, ids(2, 6), 4, pad_lens=torch.tensor([0.0, 1.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bool])
def test_generate_rejects_non_integer_ids(model, dtype):
    with pytest.raises(ValueError, match=rf"idx must hold integer token ids, got dtype {dtype}"):
        generate(model, ids(1, 5).to(dtype), 4)
    assert not model.calls


def test_generate_rejects_ids_that_are_not_a_tensor(model):
    with pytest.raises(ValueError, match="idx must be a torch.Tensor of token ids, got list"):
        generate(model, [[1, 2, 3]], 4)


@pytest.mark.parametrize("bad", [-0.5, -1, float("nan")])
def test_generate_rejects_a_negative_temperature(model, bad):
    with pytest.raises(
        ValueError,
        match=r"temperature must be 0 \(greedy\) or a finite number >= 0.0001, got "
        + re.escape(repr(bad)),
    ):
        generate(model, ids(1, 5), 4, temperature=bad)
    assert not model.calls


@pytest.mark.parametrize("bad", [0, -3, V + 1, 2.0])
def test_generate_rejects_a_bad_top_k(model, bad):
    with pytest.raises(ValueError, match=rf"top_k must be an int in \[1, {V}\], got {bad!r}"):
        generate(model, ids(1, 5), 4, temperature=1.0, top_k=bad)
    assert not model.calls


@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_generate_rejects_a_bad_max_new_tokens(model, bad):
    with pytest.raises(ValueError, match=rf"max_new_tokens must be an int >= 1, got {bad!r}"):
        generate(model, ids(1, 5), bad)
    assert not model.calls


@pytest.mark.parametrize(
    "tok, message",
    [
        (torch.tensor([[5], [V]]), rf"tok holds token id {V}, outside the vocabulary \[0, {V}\)"),
        (torch.tensor([[-1], [5]]), rf"tok holds token id -1, outside the vocabulary \[0, {V}\)"),
        (torch.tensor([[5.0], [6.0]]), r"tok must hold integer token ids, got dtype torch.float32"),
        (torch.tensor([5, 6]), r"tok must have shape \(B, 1\), got \(2,\)"),
        (torch.tensor([[5, 6], [7, 8]]), r"tok must have shape \(B, 1\), got \(2, 2\)"),
    ],
)
def test_decode_step_checks_the_token(model, tok, message):
    cache = KVCache(model.cfg.n_layers)
    prefill(model, ids(2, 4), cache)
    n_calls = len(model.calls)
    with pytest.raises(ValueError, match=message):
        decode_step(model, cache, tok)
    assert len(model.calls) == n_calls and cache.n == 4


# --- GraphDecoder ------------------------------------------------------------------------


def test_graph_decoder_checks_its_arguments(model):
    with pytest.raises(ValueError, match=rf"max_len 2000 outside \[1, max_seq_len {MAX}\]"):
        GraphDecoder(model, 2, max_len=2000, use_graph=False)
    with pytest.raises(
        ValueError, match=r"largest bucket 128 < max_len 256: the buckets must end at max_len"
    ):
        GraphDecoder(model, 2, max_len=256, buckets=(64, 128), use_graph=False)
    with pytest.raises(ValueError, match=r"largest bucket 512 > max_len 256"):
        GraphDecoder(model, 2, max_len=256, buckets=(128, 512), use_graph=False)
    with pytest.raises(ValueError, match=r"buckets must be positive ints, got \(0, 256\)"):
        GraphDecoder(model, 2, max_len=256, buckets=(0, 256), use_graph=False)
    with pytest.raises(ValueError, match=r"batch must be an int >= 1, got 0"):
        GraphDecoder(model, 0, use_graph=False)


def test_graph_decoder_prefill_checks_the_prompt(model):
    dec = GraphDecoder(model, 2, max_len=64, buckets=(32, 64), use_graph=False)
    with pytest.raises(ValueError, match=r"batch 3 != decoder batch 2"):
        dec.prefill(ids(3, 5))
    with pytest.raises(ValueError, match=r"prompt length 65 \+ max_new_tokens 0 = 65 > max_len 64"):
        dec.prefill(ids(2, 65))
    with pytest.raises(ValueError, match=rf"idx holds token id {V}, outside"):
        dec.prefill(ids(2, 5, lo=V, hi=V + 1))
    with pytest.raises(
        ValueError, match=r"pad_lens holds 5: each row needs 0 <= pads < prompt length 5"
    ):
        dec.prefill(ids(2, 5), pad_lens=torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"prompt length 60 \+ max_new_tokens 5 = 65 > max_len 64"):
        dec.generate(ids(2, 60), 5)
    with pytest.raises(ValueError, match="call prefill"):
        dec.step(ids(2, 1))
    assert not model.calls


@pytest.mark.parametrize(
    "tok, message",
    [
        (ids(3, 1), r"tok must have shape \(2, 1\), got \(3, 1\)"),
        (ids(2), r"tok must have shape \(2, 1\), got \(2,\)"),
        (ids(2, 2), r"tok must have shape \(2, 1\), got \(2, 2\)"),
        (ids(2, 1).float(), r"tok must hold integer token ids, got dtype torch.float32"),
        (torch.tensor([[5], [V]]), rf"tok holds token id {V}, outside the vocabulary \[0, {V}\)"),
        (torch.tensor([[-2], [5]]), rf"tok holds token id -2, outside the vocabulary \[0, {V}\)"),
    ],
)
def test_graph_decoder_step_checks_the_token(model, tok, message):
    dec = GraphDecoder(model, 2, max_len=64, buckets=(32, 64), use_graph=False)
    dec.prefill(ids(2, 5))
    n_calls, pos = len(model.calls), dec.cache.pos.clone()
    with pytest.raises(ValueError, match=message):
        dec.step(tok)
    assert len(model.calls) == n_calls and dec.cache.n == 5 and torch.equal(dec.cache.pos, pos)
    dec.step(ids(2, 1))  # and the decoder still works
    assert dec.cache.n == 6


def test_graph_decoder_refuses_a_step_past_max_len(model):
    dec = GraphDecoder(model, 1, max_len=40, buckets=(16, 40), use_graph=False)
    dec.prefill(ids(1, 37))
    for _ in range(3):  # positions 37, 38, 39: the last three of the cache
        dec.step(ids(1, 1))
    n_calls = len(model.calls)
    with pytest.raises(ValueError, match=r"KV cache full: position 41 > max_len 40"):
        dec.step(ids(1, 1))
    assert len(model.calls) == n_calls


def test_static_cache_prefills_only_at_position_zero(model):
    cache = StaticKVCache(model.cfg.n_layers, 1, 64, "cpu")
    cache.reset()
    prefill(model, ids(1, 5), cache)
    with pytest.raises(ValueError, match="StaticKVCache prefills only from position 0, not 5"):
        prefill(model, ids(1, 3), cache)


def test_use_graph_on_the_cpu_says_to_use_use_graph_false(model):
    msg = r"CUDA graphs need a model on a CUDA device, this one is on cpu; use use_graph=False"
    with pytest.raises(ValueError, match=msg):
        GraphDecoder(model, 2)  # use_graph=True is the default
    with pytest.raises(ValueError, match=msg):
        SlotGraphDecoder(model, SlotKVCache(model.cfg.n_layers, 2, 64, "cpu"))
    with pytest.raises(ValueError, match=msg):
        Engine(model, 2, max_len=64, use_graph=True)
    dec = GraphDecoder(model, 1, max_len=64, buckets=(32, 64), use_graph=False)
    dec.prefill(ids(1, 4))
    with pytest.raises(ValueError, match=msg):
        dec.capture()
    assert Engine(model, 2, max_len=64).use_graph is False  # None: graphs only on CUDA


def test_fused_on_the_cpu_says_to_leave_it_off(model):
    msg = r"fused=True compiles the step for a CUDA device, the model is on cpu; leave fused=False"
    with pytest.raises(ValueError, match=msg):
        GraphDecoder(model, 2, use_graph=False, fused=True)
    with pytest.raises(ValueError, match=msg):
        SlotGraphDecoder(
            model, SlotKVCache(model.cfg.n_layers, 2, 64, "cpu"), use_graph=False, fused=True
        )


# --- SlotGraphDecoder and SlotKVCache -----------------------------------------------------


def slot_decoder(model, n_slots=4, max_len=64, buckets=(32, 64)):
    slots = SlotKVCache(model.cfg.n_layers, n_slots, max_len, "cpu")
    return slots, SlotGraphDecoder(model, slots, buckets=buckets, use_graph=False)


def test_slot_decoder_checks_its_arguments(model):
    with pytest.raises(ValueError, match=rf"slot max_len 2000 > max_seq_len {MAX}"):
        SlotGraphDecoder(model, SlotKVCache(model.cfg.n_layers, 2, 2000, "cpu"), use_graph=False)
    with pytest.raises(ValueError, match=r"largest bucket 32 < max_len 64"):
        slot_decoder(model, buckets=(16, 32))
    with pytest.raises(
        ValueError, match="SlotGraphDecoder decodes a SlotKVCache, got StaticKVCache"
    ):
        SlotGraphDecoder(model, StaticKVCache(model.cfg.n_layers, 2, 64, "cpu"), use_graph=False)
    with pytest.raises(ValueError, match="n_slots must be an int >= 1, got 0"):
        SlotKVCache(model.cfg.n_layers, 0, 64, "cpu")


@pytest.mark.parametrize(
    "tok, message",
    [
        (ids(3, 1), r"tok must have shape \(4, 1\), got \(3, 1\)"),
        (ids(4), r"tok must have shape \(4, 1\), got \(4,\)"),
        (ids(4, 1).double(), r"tok must hold integer token ids, got dtype torch.float64"),
        (
            torch.tensor([[5], [V + 7], [0], [0]]),
            rf"tok holds token id {V + 7}, outside the vocabulary",
        ),
        (torch.tensor([[5], [-1], [0], [0]]), r"tok holds token id -1, outside the vocabulary"),
    ],
)
def test_slot_decoder_step_checks_the_token(model, tok, message):
    slots, dec = slot_decoder(model)
    slots.admit(2, 6)
    prefill(model, ids(1, 6), slots)
    n_calls, lens_dev = len(model.calls), slots.lens_dev.clone()
    with pytest.raises(ValueError, match=message):
        dec.step(tok)
    assert len(model.calls) == n_calls
    assert slots.lens == [0, 0, 6, 0] and torch.equal(slots.lens_dev, lens_dev)
    dec.step(ids(4, 1))
    assert slots.lens == [0, 0, 7, 0] == slots.lens_dev.tolist()


def test_slot_decoder_refuses_a_step_past_max_len(model):
    slots, dec = slot_decoder(model)
    slots.admit(1, 62)
    prefill(model, ids(1, 62), slots)
    dec.step(ids(4, 1))
    dec.step(ids(4, 1))  # wrote positions 62 and 63: the slot is full
    n_calls = len(model.calls)
    with pytest.raises(ValueError, match=r"a slot is full: 65 keys > max_len 64"):
        dec.step(ids(4, 1))
    assert len(model.calls) == n_calls and slots.lens[1] == 64


def test_slot_admission_checks_slot_and_length(model):
    slots, _ = slot_decoder(model)
    with pytest.raises(ValueError, match=r"prompt length 65 outside \[1, max_len 64\]"):
        slots.admit(0, 65)  # a prompt longer than the slot
    with pytest.raises(ValueError, match=r"prompt length 0 outside \[1, max_len 64\]"):
        slots.admit(0, 0)
    with pytest.raises(ValueError, match=r"slot 4 outside \[0, 4\)"):
        slots.admit(4, 5)
    with pytest.raises(ValueError, match=r"slot -1 outside \[0, 4\)"):
        slots.admit(-1, 5)
    slots.admit(3, 5)
    prefill(model, ids(1, 5), slots)
    with pytest.raises(ValueError, match="slot 3 is in use"):
        slots.admit(3, 5)
    with pytest.raises(ValueError, match=r"call admit\(slot, T\) before prefilling"):
        prefill(model, ids(1, 5), slots)


@pytest.mark.parametrize("bad", [-1, 4])
def test_slot_release_checks_the_slot(model, bad):
    slots, _ = slot_decoder(model)
    slots.admit(3, 5)
    prefill(model, ids(1, 5), slots)
    with pytest.raises(ValueError, match=rf"slot {bad} outside \[0, 4\)"):
        slots.release(bad)  # -1 would silently free slot 3; 4 raises IndexError
    assert slots.lens == [0, 0, 0, 5]


# --- Engine ------------------------------------------------------------------------------


def test_engine_checks_its_arguments(model):
    with pytest.raises(ValueError, match=rf"max_len 2000 outside \[2, max_seq_len {MAX}\]"):
        Engine(model, 2, max_len=2000)
    with pytest.raises(ValueError, match=r"largest bucket 32 < max_len 64"):
        Engine(model, 2, max_len=64, buckets=(16, 32))
    with pytest.raises(ValueError, match=r"n_slots must be an int >= 1, got 0"):
        Engine(model, 0)
    with pytest.raises(ValueError, match=rf"eos_id {V} outside the vocabulary \[0, {V}\)"):
        Engine(model, 2, eos_id=V)
    with pytest.raises(ValueError, match=rf"eos_id -1 outside the vocabulary \[0, {V}\)"):
        Engine(model, 2, eos_id=-1)


@pytest.mark.parametrize(
    "prompt, n, kw, message",
    [
        ([], 4, {}, "empty prompt: a request needs at least one token"),
        (torch.tensor([], dtype=torch.long), 4, {}, "empty prompt"),
        ([5, V], 4, {}, rf"prompt holds token id {V}, outside the vocabulary \[0, {V}\)"),
        ([5, -1], 4, {}, rf"prompt holds token id -1, outside the vocabulary \[0, {V}\)"),
        (torch.tensor([5, 300]), 4, {}, r"prompt holds token id 300, outside the vocabulary"),
        ([5, 6.0], 4, {}, r"prompt_ids must be ints, got 6.0"),
        (
            torch.tensor([5.0, 6.0]),
            4,
            {},
            r"1-D integer tensor or a list of ints, got torch.float32 "
            r"of shape \(2,\)",
        ),
        (torch.tensor([[5, 6]]), 4, {}, r"got torch.int64 of shape \(1, 2\)"),
        (list(range(60)), 5, {}, r"prompt length 60 \+ max_new_tokens 5 > slot max_len 64"),
        (list(range(65)), 1, {}, r"prompt length 65 \+ max_new_tokens 1 > slot max_len 64"),
        ([5], 0, {}, r"max_new_tokens must be an int >= 1, got 0"),
        ([5], 4, {"temperature": -1.0}, r"temperature must be 0 \(greedy\) or a finite number"),
        ([5], 4, {"top_k": 0}, rf"top_k must be an int in \[1, {V}\], got 0"),
    ],
)
def test_engine_submit_checks_each_request(model, prompt, n, kw, message):
    engine = Engine(model, 2, max_len=64, use_graph=False)
    with pytest.raises(ValueError, match=message):
        engine.submit(prompt, n, **kw)
    assert not engine.queue and not model.calls
    assert engine.run() == {}


def test_engine_submit_accepts_a_full_slot(model):
    engine = Engine(model, 2, max_len=64, use_graph=False)
    rid = engine.submit(list(range(60)), 4)
    assert len(engine.run()[rid]) == 4


def test_engine_submit_rejects_a_bool_max_new_tokens(model):
    engine = Engine(model, 2, max_len=64, use_graph=False)
    with pytest.raises(ValueError, match=r"max_new_tokens must be an int >= 1, got True"):
        engine.submit([5], True)


# --- the adversarial calls: each refused with a ValueError before any work -------------------

BAD_CALLS = {  # what a user passes → (call, the message it must raise)
    "temperature=True": (
        lambda m: generate(m, ids(1, 4), 2, temperature=True),
        r"temperature must be a number, got True",
    ),
    "temperature=1e-40": (
        lambda m: generate(m, ids(1, 4), 2, temperature=1e-40),
        r"temperature must be 0 \(greedy\) or a finite number >= 0\.0001",
    ),
    "temperature=inf": (
        lambda m: generate(m, ids(1, 4), 2, temperature=float("inf")),
        r"temperature must be 0 .*got inf",
    ),
    "temperature=nan": (
        lambda m: generate(m, ids(1, 4), 2, temperature=float("nan")),
        r"temperature must be 0 .*got nan",
    ),
    "temperature='0.5'": (
        lambda m: generate(m, ids(1, 4), 2, temperature="0.5"),
        r"temperature must be a number, got '0.5'",
    ),
    "top_k=True": (
        lambda m: generate(m, ids(1, 4), 2, temperature=1.0, top_k=True),
        r"top_k must be an int in \[1, 258\], got True",
    ),
    "eos_id=True": (lambda m: generate(m, ids(1, 4), 2, eos_id=True), r"eos_id True outside"),
    "eos_id=101.5": (lambda m: generate(m, ids(1, 4), 2, eos_id=101.5), r"eos_id 101.5 outside"),
    "seed=2**70": (
        lambda m: generate(m, ids(1, 4), 2, seed=2**70),
        r"seed must be None or an int in \[0, 2\*\*63\)",
    ),
    "seed=-1": (lambda m: generate(m, ids(1, 4), 2, seed=-1), r"seed must be None or an int"),
    "seed=True": (lambda m: generate(m, ids(1, 4), 2, seed=True), r"seed must be None or an int"),
    "max_new_tokens=True": (
        lambda m: generate(m, ids(1, 4), True),
        r"max_new_tokens must be an int >= 1, got True",
    ),
    "ids as a list": (lambda m: generate(m, [[1, 2]], 2), r"idx must be a torch.Tensor"),
    "bool ids": (
        lambda m: generate(m, torch.ones(1, 3, dtype=torch.bool), 2),
        r"idx must hold integer token ids, got dtype torch.bool",
    ),
    "uint8 id 255 > vocab? no: int16 id 300": (
        lambda m: generate(m, torch.tensor([[300]], dtype=torch.int16), 2),
        r"idx holds token id 300, outside the vocabulary",
    ),
    "forward with id 999": (lambda m: m(torch.tensor([[999]])), r"idx holds token id 999"),
    "forward with a list": (lambda m: m([1, 2]), r"idx must be \(B, T\), got shape list"),
    "GraphDecoder(batch=True)": (
        lambda m: GraphDecoder(m, True, use_graph=False),
        r"batch must be an int >= 1, got True",
    ),
    "GraphDecoder(max_len=64.0)": (
        lambda m: GraphDecoder(m, 1, max_len=64.0, use_graph=False),
        r"max_len 64.0 outside \[1, max_seq_len 1024\]",
    ),
    "GraphDecoder(use_graph=1)": (
        lambda m: GraphDecoder(m, 1, use_graph=1),
        r"use_graph must be True or False, got 1",
    ),
    "GraphDecoder(buckets=128)": (
        lambda m: GraphDecoder(m, 1, buckets=128, use_graph=False),
        r"buckets must be a tuple of positive ints, got 128",
    ),
    "GraphDecoder(buckets=(True, 1024))": (
        lambda m: GraphDecoder(m, 1, buckets=(True, 1024), use_graph=False),
        r"buckets must be positive ints",
    ),
    "GraphDecoder(fused='yes')": (
        lambda m: GraphDecoder(m, 1, use_graph=False, fused="yes"),
        r"fused must be False, True or a dict",
    ),
    "capture(windows=128)": (
        lambda m: GraphDecoder(m, 1, use_graph=False).capture(128),
        r"windows must be a tuple of buckets, got 128",
    ),
    "Engine(n_slots=True)": (lambda m: Engine(m, True), r"n_slots must be an int >= 1, got True"),
    "Engine(eos_id=101.5)": (lambda m: Engine(m, 2, eos_id=101.5), r"eos_id 101.5 outside"),
    "Engine(use_graph='no')": (
        lambda m: Engine(m, 2, use_graph="no"),
        r"use_graph must be None, True or False",
    ),
    "submit(seed=2**70)": (
        lambda m: Engine(m, 2, use_graph=False).submit([1, 2], 3, seed=2**70),
        r"seed must be None or an int",
    ),
    "submit(temperature=1e-40)": (
        lambda m: Engine(m, 2, use_graph=False).submit([1, 2], 3, temperature=1e-40),
        r"temperature must be 0 \(greedy\)",
    ),
    "submit('text')": (
        lambda m: Engine(m, 2, use_graph=False).submit("text", 3),
        r"prompt_ids must be a list of ints, got str",
    ),
    "submit(float tensor)": (
        lambda m: Engine(m, 2, use_graph=False).submit(torch.tensor([1.0, 2.0]), 3),
        r"prompt_ids must be a 1-D integer tensor",
    ),
    "StaticKVCache(batch=0)": (
        lambda m: StaticKVCache(4, 0, 64, "cpu"),
        r"batch must be an int >= 1, got 0",
    ),
    "StaticKVCache(max_len=-1)": (
        lambda m: StaticKVCache(4, 1, -1, "cpu"),
        r"max_len must be an int >= 1, got -1",
    ),
    "StaticKVCache.reset(pads of another batch)": (
        lambda m: StaticKVCache(4, 2, 64, "cpu").reset(torch.tensor([0, 1, 2])),
        r"pad_lens must be a tensor of shape \(2,\)",
    ),
    "SlotKVCache(n_layers=0)": (
        lambda m: SlotKVCache(0, 2, 64, "cpu"),
        r"n_layers must be an int >= 1, got 0",
    ),
    "SlotKVCache.admit(slot=True)": (
        lambda m: SlotKVCache(4, 2, 64, "cpu").admit(True, 3),
        r"slot True outside \[0, 2\)",
    ),
    "SlotKVCache.admit(T=2.5)": (
        lambda m: SlotKVCache(4, 2, 64, "cpu").admit(0, 2.5),
        r"prompt length 2.5 outside",
    ),
    "a model on the meta device": (
        lambda m: generate(type(m)(m.cfg).to("meta"), ids(1, 4), 2),
        r"the model is on the meta device",
    ),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_bad_call_is_refused_before_any_work(model, case):
    call, message = BAD_CALLS[case]
    embedded = []
    hook = model.tok_emb.register_forward_pre_hook(lambda mod, args: embedded.append(1))
    try:
        with pytest.raises(ValueError, match=message):
            call(model)
    finally:
        hook.remove()
    assert not embedded, f"{case}: the model ran before the error"
    if not case.startswith("forward"):  # (a forward call is itself the model's)
        assert not model.calls, f"{case}: the model was called"


def test_small_integer_ids_are_accepted(model):
    """Any integer dtype holds token ids; the model casts them for its embedding."""
    idx = ids(2, 5)
    want = generate(model, idx, 4)
    for dtype in (torch.uint8, torch.int16, torch.int32):
        assert torch.equal(generate(model, idx.to(dtype), 4), want), dtype
