"""Continuous batching: the slot cache, its decode step, and the engine, on the CPU.

Greedy outputs are compared token for token with each request run alone through eager
generate(). That is not the same computation (the slot step attends over a masked bucket
window with per-row RoPE, in a batch of n_slots rows), so it is equal only because the
shipped model's top-2 margins on real text are far above fp32 rounding (~1e-5 here); a
mismatch would show a near-tie, and the test then reports the margin at the first
differing token.
"""

import functools
import os
import random
import signal

import pytest
import torch
from conftest import FAULT_EOS, FAULT_REQUESTS, assert_some_finish_by_eos

from tinyllm import Engine, SlotGraphDecoder, SlotKVCache, generate
from tinyllm import engine as engine_module
from tinyllm.generation import decode_step, prefill
from tinyllm.kv_cache import KVCache

EOS = ord("e")  # a byte the shipped model emits often, but not always within 30 tokens


def cut(doc_ids, rng, n):
    s = rng.randrange(len(doc_ids) - n)
    return doc_ids[s : s + n]


def test_slot_lengths_agree_on_host_and_device(shipped_model, doc_ids):
    """Drive SlotGraphDecoder (use_graph=False) through admissions and releases; after
    every step the host and device lengths agree, and every active slot's logits match
    its request run alone with the dynamic cache."""
    model = shipped_model
    n_slots, max_len = 4, 96
    slots = SlotKVCache(model.cfg.n_layers, n_slots, max_len, "cpu")
    dec = SlotGraphDecoder(model, slots, buckets=(32, 64, 96), use_graph=False)
    rng, text_rng = random.Random(1), random.Random(2)
    # (prompt length, tokens to decode), popped from the end: short ones first (window 32),
    # long ones later (window 96); prompt + tokens <= max_len
    plan = [
        (50, 46),
        (9, 30),
        (1, 40),
        (33, 12),
        (20, 40),
        (47, 5),
        (2, 2),
        (60, 36),
        (15, 25),
        (40, 1),
        (5, 20),
        (28, 33),
        (3, 9),
        (12, 6),
    ]
    queue = [(cut(doc_ids, text_rng, T), n) for T, n in plan]
    running = {}  # slot → [eager cache, last token, steps left]
    steps, windows, admitted, released = 0, set(), 0, 0
    while queue or running:
        # admit at most one request per step, so admissions land mid-stream
        free = slots.free_slots()
        if queue and free:
            prompt, n = queue.pop()
            slot = free[rng.randrange(len(free))]
            logits = prefill(model, torch.tensor([prompt]), slots.prefilling(slot))
            ref_cache = KVCache(model.cfg.n_layers)
            ref = prefill(model, torch.tensor([prompt]), ref_cache)
            assert torch.equal(logits, ref)  # the same eager prefill
            running[slot] = [ref_cache, int(ref[0, -1].argmax()), n]
            admitted += 1
            assert slots.lens == slots.lens_dev.tolist()
            assert slots.active == [bool(a) for a in slots.active_dev.tolist()]
        tok = torch.zeros(n_slots, 1, dtype=torch.long)
        for s, (_, last, _) in running.items():
            tok[s, 0] = last
        before = list(slots.lens)
        windows.add(dec.graph_key())
        out = dec.step(tok)
        steps += 1
        assert slots.lens == slots.lens_dev.tolist(), f"step {steps}"
        assert slots.lens == [n + 1 if s in running else 0 for s, n in enumerate(before)]
        assert torch.isfinite(out).all()
        for s in list(running):
            ref_cache, last, left = running[s]
            ref = decode_step(model, ref_cache, torch.tensor([[last]]))
            torch.testing.assert_close(out[s], ref[0], atol=1e-4, rtol=0)
            running[s] = [ref_cache, int(ref[0, -1].argmax()), left - 1]
            if left == 1:
                slots.release(s)
                del running[s]
                released += 1
                assert slots.lens[s] == 0 == int(slots.lens_dev[s])
                assert slots.lens == slots.lens_dev.tolist()
    assert admitted == released == 14
    assert windows == {32, 64, 96}
    assert slots.lens == slots.lens_dev.tolist() == [0] * n_slots


@pytest.fixture(scope="module")
def requests(doc_ids):
    rng, text_rng = random.Random(0), random.Random(1)
    return [(cut(doc_ids, text_rng, rng.randint(1, 40)), rng.randint(1, 30)) for _ in range(24)]


def first_difference(model, prompt, got, want):
    """Where the engine and the lone run part, and the lone run's top-2 margin there."""
    i = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
    with torch.no_grad():
        logits, _ = model(torch.tensor([prompt + want[:i]]))
    top2 = logits[0, -1].topk(2).values
    return (
        f"token {i}: engine {got[i]}, alone {want[i]}, top-2 margin {float(top2[0] - top2[1]):.3g}"
    )


def test_engine_serves_24_requests_like_each_alone(shipped_model, requests):
    engine = Engine(shipped_model, n_slots=8, max_len=128, use_graph=False, eos_id=EOS)
    calls = []
    step = engine.decoder.step
    engine.decoder.step = lambda tok, check=True: calls.append(1) or step(tok, check)
    rids = [engine.submit(p, n) for p, n in requests]
    assert rids == list(range(24))  # three times the slots: a queue to admit from
    result = engine.run()

    # none lost, none duplicated, none left behind
    assert sorted(result) == rids
    assert not engine.n_waiting() and not engine.running
    assert engine.slots.lens == [0] * 8 and engine.slots.free_slots() == list(range(8))

    by_eos = 0
    for rid, (prompt, n) in zip(rids, requests):
        alone = generate(shipped_model, torch.tensor([prompt]), n, eos_id=EOS)[0].tolist()
        if EOS in alone:
            alone = alone[: alone.index(EOS) + 1]
            by_eos += 1
        got = result[rid]
        assert got == alone, f"request {rid}: " + first_difference(
            shipped_model, prompt, got, alone
        )
        assert len(got) == n or got[-1] == EOS
    assert 3 <= by_eos <= 21  # both ways of finishing happen often

    # stats: one entry per decode step; n_active counts the occupied slots
    assert len(engine.stats) == len(calls) > 0
    assert [s["step"] for s in engine.stats] == list(range(len(calls)))
    for s in engine.stats:
        assert len(s["slots"]) == 8
        assert s["n_active"] == sum(r is not None for r in s["slots"]) >= 1
        assert s["window"] in engine.decoder.buckets and s["step_s"] >= 0
    assert max(s["n_active"] for s in engine.stats) == 8
    # every request held its slot for one decode step per token after the first
    # (the first comes from the prefill), in one slot
    for rid in rids:
        held = [s["slots"].index(rid) for s in engine.stats if rid in s["slots"]]
        assert len(held) == len(result[rid]) - 1
        assert len(set(held)) <= 1


def test_engine_without_eos_runs_to_length(shipped_model, requests):
    engine = Engine(shipped_model, n_slots=3, max_len=128, use_graph=False)
    subset = requests[:6]
    rids = [engine.submit(torch.tensor(p), n) for p, n in subset]
    result = engine.run()
    for rid, (prompt, n) in zip(rids, subset):
        assert result[rid] == generate(shipped_model, torch.tensor([prompt]), n)[0].tolist()


def test_engine_sampling_follows_each_requests_seed(shipped_model, requests):
    """A sampled request's noise is keyed by its seed and each token's position: the same
    seed gives the same text whatever else shares the batch, in whichever slot, and matches
    generate() with that seed."""
    prompt, n = requests[3][0], 25
    outs = []
    for others in (0, 1, 3):  # alone, then in slot 1, then in slot 3
        engine = Engine(shipped_model, n_slots=4, max_len=128, use_graph=False)
        for i, (p, m) in enumerate(requests[10 : 10 + others]):
            engine.submit(p, m, **({"temperature": 0.8, "seed": 99} if i % 2 else {}))
        rid = engine.submit(prompt, n, temperature=1.0, top_k=20, seed=5)
        outs.append(engine.run()[rid])
    assert outs[0] == outs[1] == outs[2]
    assert (
        outs[0]
        == generate(shipped_model, torch.tensor([prompt]), n, temperature=1.0, top_k=20, seed=5)[
            0
        ].tolist()
    )
    engine = Engine(shipped_model, n_slots=2, max_len=128, use_graph=False)
    a = engine.submit(prompt, n, temperature=1.0, top_k=20, seed=6)
    assert engine.run()[a] != outs[0]


# --- failure paths: nothing lost ------------------------------------------------------------


def fault_engine(model, doc_ids):
    engine = Engine(model, n_slots=3, max_len=64, eos_id=FAULT_EOS, use_graph=False)
    rids = [engine.submit(doc_ids[s : s + n], m, **kw) for s, n, m, kw in FAULT_REQUESTS]
    return engine, rids


@pytest.fixture(scope="module")
def uninterrupted(toy_model, doc_ids):
    """The fault tables run on the toy model: a faulted run is compared with this run of the
    same model, so what they test needs no trained weights."""
    engine, rids = fault_engine(toy_model, doc_ids)
    out = engine.run()
    assert_some_finish_by_eos(out, rids)
    return out


class Fault:
    """Wraps fn: its call number `at` raises `error` (once), every other call goes through."""

    def __init__(self, fn, at: int, error: BaseException):
        self.fn, self.at, self.error, self.calls, self.raised_on = fn, at, error, 0, None

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            self.raised_on = args
            raise self.error
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):  # set on a class, it wraps a method
        return self if obj is None else functools.partial(self, obj)


def check_positions(engine):
    slots = engine.slots
    slots.sync()
    assert slots.lens == slots.lens_dev.tolist()
    assert slots.active == [bool(a) for a in slots.active_dev.tolist()]
    assert sorted(engine.running) == [s for s in range(engine.n_slots) if slots.active[s]]


POINTS = {  # where a fault is injected: (object, attribute) → the calls to fail
    "admission": (lambda e: e.slots, "prefilling", (1, 3, 5)),
    "prefill": (lambda e: engine_module, "prefill", (1, 2, 6)),
    "sample": (lambda e: engine_module, "sample", (1, 4, 13)),
    "decode step": (lambda e: e.decoder, "step", (1, 5, 8)),
    "release": (lambda e: e.slots, "release", (1, 3)),
    "host advance": (lambda e: e.slots, "advance_host", (2, 7)),
}
OWN = ("prefill",)  # a request's own prefill, as an Exception


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("device lost")],
                         ids=["ctrl-c", "runtime"])  # fmt: skip
def test_a_fault_anywhere_loses_nothing(toy_model, doc_ids, uninterrupted, point, error,
                                        monkeypatch):  # fmt: skip
    """A Ctrl-C (or an error that is not one request's own) at any admission, prefill,
    sample, decode step, release or host advance: run() raises, the positions on host and
    device still agree, and the next run() returns every request with the tokens of an
    uninterrupted run. Where the fault hit a request's own prefill or sampling as an
    Exception, that request alone is in engine.failed."""
    owner, name, ats = POINTS[point]
    for at in ats:
        engine, rids = fault_engine(toy_model, doc_ids)
        target = owner(engine)
        fault = Fault(getattr(target, name), at, error)
        monkeypatch.setattr(target, name, fault)
        with pytest.raises(type(error)):
            engine.run()
        check_positions(engine)
        monkeypatch.setattr(target, name, fault.fn)
        got = engine.run()
        check_positions(engine)
        assert fault.calls >= at, (point, at, "the fault was never reached")
        # a prefill is the request's own; the sampling of an admission (one row) is the
        # request's own, a decode step's (every row at once) is the step's
        one_row = point == "sample" and fault.raised_on[0].shape[0] == 1
        own = isinstance(error, Exception) and (point in OWN or one_row)
        assert len(engine.failed) == int(own), (point, at, engine.failed)
        for rid in rids:
            if rid in engine.failed:
                assert rid not in got
            else:
                assert got[rid] == uninterrupted[rid], (point, at, rid)
        assert not engine.n_waiting() and not engine.running


def test_a_request_whose_sampling_fails_leaves_alone(toy_model, doc_ids, uninterrupted,
                                                     monkeypatch):  # fmt: skip
    """A request's own sampling raises (here: request 5's first token, sampled alone after
    its prefill): it is removed into engine.failed with its error, the error is raised, and
    the others finish as if nothing happened."""
    engine, rids = fault_engine(toy_model, doc_ids)
    bad = engine.requests[5]
    original = engine.sample_for

    def sample_for(reqs, logits):
        if reqs == [bad]:
            raise ValueError("probabilities contain a NaN")
        return original(reqs, logits)

    monkeypatch.setattr(engine, "sample_for", sample_for)
    with pytest.raises(ValueError, match="NaN"):
        engine.run()
    assert list(engine.failed) == [5] and "NaN" in str(engine.failed[5])
    got = engine.run()
    assert sorted(got) == [r for r in rids if r != 5]
    assert all(got[r] == uninterrupted[r] for r in got)
    check_positions(engine)


def test_results_of_a_run_that_raised_come_with_the_next(toy_model, doc_ids, monkeypatch):
    engine, rids = fault_engine(toy_model, doc_ids)
    fault = Fault(engine.decoder.step, 7, KeyboardInterrupt())
    monkeypatch.setattr(engine.decoder, "step", fault)
    with pytest.raises(KeyboardInterrupt):
        engine.run()
    finished_before = {rid: list(engine.requests[rid].out) for rid in engine.finished}
    assert finished_before  # some finished inside the run that raised
    monkeypatch.setattr(engine.decoder, "step", fault.fn)
    got = engine.run()
    assert finished_before.items() <= got.items() and sorted(got) == rids
    assert engine.run() == {}  # returned once


@pytest.mark.parametrize("point", ["decode step", "sample", "release"])
def test_a_second_ctrl_c_while_a_move_is_undone_loses_nothing(toy_model, doc_ids,
                                                              uninterrupted, point,
                                                              monkeypatch):  # fmt: skip
    """A Ctrl-C, then a second one (a real SIGINT) while the engine puts the move back: the
    putting back runs with Ctrl-C held off, so it finishes, the second KeyboardInterrupt comes
    after it, and the next run() returns the tokens of an uninterrupted run."""
    owner, name, _ = POINTS[point]
    engine, rids = fault_engine(toy_model, doc_ids)
    target = owner(engine)
    fault = Fault(getattr(target, name), 4, KeyboardInterrupt())
    monkeypatch.setattr(target, name, fault)
    sync, sent = engine.slots.sync, []

    def sync_under_ctrl_c():  # the undo rewrites the device: Ctrl-C then
        if fault.calls >= fault.at and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return sync()

    monkeypatch.setattr(engine.slots, "sync", sync_under_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        engine.run()
    assert sent, "the second Ctrl-C was not sent"
    check_positions(engine)
    monkeypatch.setattr(target, name, fault.fn)
    got = engine.run()
    assert got == {rid: uninterrupted[rid] for rid in rids}
