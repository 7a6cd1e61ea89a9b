"""The paged engine on the CPU: its tokens are each request's alone, eager or replayed
(simulated), prefilled in batches or from graphs, overlapped or not; every graph is captured
before serving; the torch ops a step issues outside its replay do not grow with the rows; and
a fault anywhere, even inside the undo, loses and changes nothing."""

import functools
import os
import random
import signal

import pytest
import torch
from conftest import FAULT_EOS, FAULT_REQUESTS, assert_some_finish_by_eos

from tinyllm import PagedEngine, generate
from tinyllm import serve as serve_module
from tinyllm.graphs import default_capture_sizes
from tinyllm.lab import engine_time, simgraph
from tinyllm.paged import PagedFill
from tinyllm.rows import SCRATCH, Download, Rows, Upload

EOS = ord("e")  # a byte the shipped model emits often, but not always within 30 tokens


def check_rows(engine):
    """The device holds what the host says, every block is held once, the requests sit in
    the first rows."""
    rows = engine.rows
    rows.flush()
    h = rows.host
    assert rows.lens_dev.tolist() == rows.lens.tolist()
    assert rows.active_dev.tolist() == rows.active.astype(int).tolist()
    assert rows.block_table.tolist() == rows.tables_host.tolist()
    held = [b for r in range(rows.n_rows) for b in rows.tables_host[r, : h.held[r]].tolist()]
    assert sorted(held + rows.free) == list(range(1, rows.n_blocks))
    assert ((h.rid >= 0) == rows.active).all()  # a row holds a request or nothing
    assert (rows.tables_host[~rows.active] == SCRATCH).all()


def cut(doc_ids, rng, n):
    s = rng.randrange(len(doc_ids) - n)
    return doc_ids[s : s + n]


def alone(model, prompt, n, **kw):
    out = generate(model, torch.tensor([prompt]), n, eos_id=kw.pop("eos_id", None), **kw)[0]
    out = out.tolist()
    return out[: out.index(EOS) + 1] if EOS in out else out


def test_the_paged_engine_serves_requests_like_each_alone(shipped_model, doc_ids):
    rng = random.Random(3)
    reqs = [(cut(doc_ids, rng, rng.randint(1, 30)), rng.randint(1, 20)) for _ in range(24)]
    engine = PagedEngine(shipped_model, 5, max_len=64, use_graph=False)
    rids = [engine.submit(p, n) for p, n in reqs]
    out = engine.run()
    for rid, (p, n) in zip(rids, reqs):
        assert out[rid] == generate(shipped_model, torch.tensor([p]), n)[0].tolist(), rid
    sizes = [s["capture_size"] for s in engine.stats]
    assert set(sizes) <= set(default_capture_sizes(5)) == {1, 2, 4, 5} and 5 in sizes
    for s in engine.stats:  # the requests sit in the first rows: the step runs no free row
        held = [r for r in s["rows"].tolist() if r >= 0]
        assert s["rows"].tolist()[: len(held)] == held and s["capture_size"] >= len(held)
    check_rows(engine)


@pytest.fixture(scope="module")
def waves(doc_ids):
    """30 requests, prompts of 1 to 30 tokens, greedy and seeded, submitted 5 at a time."""
    rng = random.Random(11)
    reqs = []
    for s in rng.sample(range(len(doc_ids) - 40), 30):
        prompt = doc_ids[s : s + rng.choice([1, 2, 7, 8, 9, 15, 16, 17, 24, 30])]
        sampling = rng.choice([{}, {"temperature": 0.9, "top_k": 30, "seed": s}])
        reqs.append((prompt, rng.randint(1, 16), sampling))
    return reqs


def serve_in_waves(engine, reqs):
    """5 more requests every 3 decode steps, so admissions come at different steps, in
    batches of several sizes and lengths."""
    rids = []
    for wave in range(0, len(reqs), 5):
        rids += [engine.submit(p, n, **kw) for p, n, kw in reqs[wave : wave + 5]]
        for _ in range(3):
            engine.admit()
            if engine.rows.active.any():
                engine.step()
    out = engine.run()
    return [out[r] for r in rids]


@pytest.mark.parametrize(
    "kw",
    [
        {"prefill_graphs": False},
        {},
        {"use_graph": True, "graph_api": simgraph, "overlap": True, "min_admit": 3},
    ],
    ids=["chunks", "prefill forward", "graphs, overlap, min_admit 3"],
)
def test_each_request_gets_its_tokens_alone(shipped_model, waves, kw):
    """Prefilled in batches (chunks of 8 positions, or the prefill graphs' forward, eager or
    replayed), each request's tokens are those of generate() alone. The batched forward is
    not the lone one (other rows, pads, an explicit mask: the logits differ by fp32 rounding),
    so equal tokens rest on the shipped model's margins on real text, far above it."""
    engine = PagedEngine(shipped_model, 6, max_len=64, eos_id=EOS, prefill_chunk=8,
                         **{"use_graph": False, **kw})  # fmt: skip
    fills = []
    fill = engine.cache.fill
    engine.cache.fill = lambda *a: fills.append(a) or fill(*a)  # the eager chunks' calls
    got = serve_in_waves(engine, waves)
    for toks, (prompt, n, sampling) in zip(got, waves):
        assert toks == alone(shipped_model, prompt, n, eos_id=EOS, **sampling)
    check_rows(engine)
    if kw.get("prefill_graphs") is False:  # every prompt position once, several in a forward
        assert sum(sum(c) for _, c, _ in fills) == sum(len(p) for p, _, _ in waves)
        assert max(len(r) for r, _, _ in fills) == 5 and max(s for *_, s in fills) == 24
        assert len(fills) < sum(-(-len(p) // 8) for p, _, _ in waves)
    else:  # only an admission with a prompt longer than a chunk goes in chunks
        assert fills and all(8 in c for _, c, s in fills if s == 0)


TOY_EOS = 198  # a byte the toy model emits in some of the waves' requests, not all


def test_an_admission_waits_for_min_admit_free_rows(toy_model, waves):
    """While requests wait, each admission takes at least min_admit of them, the last as
    many as are left; the tokens are those of admitting whenever a row is free."""
    runs = {}
    for k in (1, 3):
        engine = PagedEngine(toy_model, 6, max_len=64, eos_id=TOY_EOS, use_graph=False,
                             min_admit=k)  # fmt: skip
        rids = [engine.submit(p, n, **kw) for p, n, kw in waves]
        out = engine.run()
        runs[k] = [out[r] for r in rids], [a["n"] for a in engine.admissions]
    (tokens1, admitted1), (tokens3, admitted3) = runs[1], runs[3]
    assert tokens3 == tokens1
    assert min(admitted1) == 1 and min(admitted3[:-1]) >= 3 and len(admitted3) < len(admitted1)


def test_overlap_changes_when_the_host_works_not_what_runs(toy_model, waves):
    """Both runs on the same model: the toy one, whose waves end at TOY_EOS or at their
    max_new_tokens, both often."""
    runs = []
    for overlap in (False, True):
        engine = PagedEngine(toy_model, 4, max_len=64, use_graph=True, graph_api=simgraph,
                             eos_id=TOY_EOS, overlap=overlap)  # fmt: skip
        runs.append((serve_in_waves(engine, waves), [s["rows"].tolist() for s in engine.stats]))
    assert runs[0] == runs[1]
    by_eos = [len(t) < n and t[-1] == TOY_EOS for t, (_, n, _) in zip(runs[0][0], waves)]
    assert 3 <= sum(by_eos) <= len(waves) - 3, by_eos


def test_every_graph_is_captured_before_serving(toy_model, doc_ids):
    engine = PagedEngine(toy_model, 4, max_len=64, use_graph=True, graph_api=simgraph)
    seconds = engine.capture()
    assert seconds == engine.capture_s > 0
    assert sorted(engine.decode_graphs) == [1, 2, 4]
    assert sorted(engine.fill_graphs) == [(r, t) for r in (1, 2, 4) for t in (16, 32, 64)]
    graphs = {
        k: id(v[0]) for g in (engine.decode_graphs, engine.fill_graphs) for k, v in g.graphs.items()
    }
    rng = random.Random(0)
    for _ in range(6):
        engine.submit(cut(doc_ids, rng, rng.randint(1, 40)), rng.randint(1, 10))
    engine.run()
    after = {
        k: id(v[0]) for g in (engine.decode_graphs, engine.fill_graphs) for k, v in g.graphs.items()
    }
    assert after == graphs  # run() captured nothing, replaced nothing


def test_run_captures_first_when_capture_was_not_called(toy_model):
    engine = PagedEngine(toy_model, 2, max_len=32, use_graph=True, graph_api=simgraph)
    engine.submit([1, 2, 3], 4)
    engine.run()
    assert engine.capture_s is not None and sorted(engine.decode_graphs) == [1, 2]


def test_sampling_follows_each_requests_seed(shipped_model, doc_ids):
    """A sampled request's noise is keyed by its seed and each token's position: the same
    seed gives the same text whatever else shares the batch, in whichever row."""
    rng = random.Random(0)
    prompt, n = cut(doc_ids, rng, 20), 25
    others = [(cut(doc_ids, rng, 10), 12) for _ in range(3)]
    outs = []
    for k in (0, 1, 3):  # alone, then with one other, then with three
        engine = PagedEngine(shipped_model, 4, max_len=128, use_graph=False)
        for i, (p, m) in enumerate(others[:k]):
            engine.submit(p, m, **({"temperature": 0.8, "seed": 99} if i % 2 else {}))
        rid = engine.submit(prompt, n, temperature=1.0, top_k=20, seed=5)
        outs.append(engine.run()[rid])
    want = generate(shipped_model, torch.tensor([prompt]), n, temperature=1.0, top_k=20, seed=5)
    assert outs[0] == outs[1] == outs[2] == want[0].tolist()


def test_the_ops_a_step_issues_outside_its_replay_do_not_grow_with_the_rows(toy_model):
    """Through the simulator: a decode step issues at most the same few torch ops outside its
    replay at 8 rows and at 64 (Rows' changes are vectorised, one upload a step, of any number
    of rows and moves). More of the steps at 64 rows have rows to change, so the mean is
    higher."""
    ops = {n: engine_time.outside_replays(toy_model, n, measures=("ops",))["ops"] for n in (8, 64)}
    assert max(ops[64]) <= max(ops[8]) <= 5, ops


# --- failure paths: nothing lost ------------------------------------------------------------

VARIANTS = {  # chunks of 4 positions: every prompt takes 2 or 3 forwards, shared
    "chunks": {"prefill_graphs": False, "prefill_chunk": 4},
    "eager, overlap": {"overlap": True, "prefill_chunk": 16},
    "graphs, overlap": {
        "use_graph": True,
        "graph_api": simgraph,
        "overlap": True,
        "prefill_chunk": 16,
        "min_admit": 2,  # an admission waits for 2 free rows of the 3
    },  # one bucket of positions: few graphs to capture
}


def fault_engine(model, doc_ids, variant):
    engine = PagedEngine(model, 3, max_len=64, eos_id=FAULT_EOS, **{"use_graph": False,
                                                             **VARIANTS[variant]})  # fmt: skip
    if engine.use_graph:
        engine.capture()  # before the faults: capture is not a move
    rids = [engine.submit(doc_ids[s : s + n], m, **kw) for s, n, m, kw in FAULT_REQUESTS]
    return engine, rids


@pytest.fixture(scope="module")
def uninterrupted(toy_model, doc_ids):
    """The fault tables run on the toy model: a faulted run is compared with this run of the
    same model, so what they test needs no trained weights."""
    runs = {v: fault_engine(toy_model, doc_ids, v) for v in VARIANTS}
    runs = {v: (engine.run(), rids) for v, (engine, rids) in runs.items()}
    assert runs["chunks"] == runs["eager, overlap"] == runs["graphs, overlap"]
    assert_some_finish_by_eos(*runs["chunks"])
    return runs["chunks"][0]


class Fault:
    """Wraps fn: its call number `at` raises `error` (once), every other call goes through."""

    def __init__(self, fn, at: int, error: BaseException):
        self.fn, self.at, self.error, self.calls = fn, at, error, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            raise self.error
        return self.fn(*args, **kwargs)

    def __get__(self, obj, owner=None):  # set on a class, it wraps a method
        return self if obj is None else functools.partial(self, obj)


POINTS = {  # where a fault is injected: (object, attribute) → the calls to fail
    "take": (Rows, "take", (1, 3)),
    "fill forward": (PagedFill, "update", (2, 7)),  # inside a prefill's forward: the toy
    # model's 2 layers, so its first forward's second layer, the fourth's first
    "upload": (Upload, "__call__", (1, 4)),  # a prefill graph's inputs, or a flush
    "replay": (simgraph.CUDAGraph, "replay", (1, 8)),
    "admit": (Rows, "admit", (1, 3)),
    "grow": (Rows, "grow", (1, 5)),
    "flush": (Rows, "flush", (2, 9)),
    "sample": (serve_module, "sample", (1, 4)),  # a step's, or an admission's first ids
    "read": (Download, "__call__", (1, 9)),  # the ids a step reads, on their way
    "hand out": (PagedEngine, "hand_out", (2, 6)),
    "release": (Rows, "release", (1, 2)),
    "move": (Rows, "move", (1,)),
    "host advance": (Rows, "advance_host", (2, 7)),
}
CASES = [
    (v, p)
    for v in VARIANTS
    for p in POINTS
    if not (p in ("upload", "replay") and "graphs" not in v)  # no graph, nothing to fail
    and not (p in ("fill forward", "sample") and v == "graphs, overlap")
]  # in the graphs


# each case meets one of the two faults, in turn: every variant meets both, at alternate points
ERRORS = [KeyboardInterrupt(), RuntimeError("device lost")]
FAULT_CASES = [(v, p, ERRORS[i % 2]) for i, (v, p) in enumerate(CASES)]


@pytest.mark.parametrize("variant, point, error", FAULT_CASES,
                         ids=[f"{type(e).__name__}-{v}-{p}" for v, p, e in FAULT_CASES],
                         )  # fmt: skip
def test_a_fault_anywhere_loses_nothing(toy_model, doc_ids, uninterrupted, variant, point,
                                        error, monkeypatch):  # fmt: skip
    """A Ctrl-C or an error at any point of an admission or a decode step: run() raises,
    host and device still agree, and the next run() returns every request with the tokens
    of an uninterrupted run. Every forward and sampling call is shared by the requests of a
    move, so any failure is the move's: undone whole."""
    owner, name, ats = POINTS[point]
    for at in ats:
        engine, rids = fault_engine(toy_model, doc_ids, variant)
        fault = Fault(getattr(owner, name), at, error)
        monkeypatch.setattr(owner, name, fault)
        with pytest.raises(type(error)):
            engine.run()
        monkeypatch.setattr(owner, name, fault.fn)
        check_rows(engine)
        got = engine.run()
        assert fault.calls >= at, (point, at, "the fault was never reached")
        assert got == {r: uninterrupted[r] for r in rids}, (point, at)
        assert engine.run() == {} and not engine.n_waiting()


def test_results_of_a_run_that_raised_come_with_the_next(toy_model, doc_ids, monkeypatch):
    engine, rids = fault_engine(toy_model, doc_ids, "chunks")
    fault = Fault(PagedEngine.hand_out, 9, KeyboardInterrupt())
    monkeypatch.setattr(PagedEngine, "hand_out", fault)
    with pytest.raises(KeyboardInterrupt):
        engine.run()
    finished = list(engine.finished)
    assert finished  # some finished inside the run that raised
    monkeypatch.setattr(PagedEngine, "hand_out", fault.fn)
    got = engine.run()
    assert set(finished) <= set(got) and sorted(got) == rids
    assert engine.run() == {}  # returned once


class Timeout(Exception):
    pass


UNDO_FAULTS = {  # what goes wrong inside the undo's rewrite of the device (Rows.flush)
    "an exception": lambda: (_ for _ in ()).throw(RuntimeError("device lost in the undo")),
    "a second ctrl-c": lambda: os.kill(os.getpid(), signal.SIGINT),
    "a timer signal": lambda: os.kill(os.getpid(), signal.SIGALRM),
}


@pytest.mark.parametrize("variant, point", [("chunks", "sample"), ("chunks", "hand out"),
                                            ("graphs, overlap", "replay"),
                                            ("graphs, overlap", "move"),
                                            ("eager, overlap", "grow"),
                                            ("eager, overlap", "release")])  # fmt: skip
@pytest.mark.parametrize("inside", list(UNDO_FAULTS))
def test_a_fault_inside_the_undo_loses_nothing(toy_model, doc_ids, uninterrupted, variant,
                                               point, inside, monkeypatch):  # fmt: skip
    """A move fails, then its undo meets another fault while it rewrites the device: an
    exception (left for the next move's flush), a second Ctrl-C or a timer signal (held
    off until the move is undone, then raised). Nothing is lost, changed or wedged: the next
    run() returns every request with the tokens of an uninterrupted run."""
    previous = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(Timeout()))
    try:
        owner, name, ats = POINTS[point]
        engine, rids = fault_engine(toy_model, doc_ids, variant)
        fault = Fault(getattr(owner, name), ats[-1], KeyboardInterrupt())
        monkeypatch.setattr(owner, name, fault)
        flush, sent = Rows.flush, []

        def flush_in_the_undo(rows):
            if fault.calls >= fault.at and not rows.in_step() and not sent:
                sent.append(1)  # the undo's rewrite, the first after the fault
                UNDO_FAULTS[inside]()
            return flush(rows)

        monkeypatch.setattr(Rows, "flush", flush_in_the_undo)
        with pytest.raises((KeyboardInterrupt, Timeout)):
            engine.run()
        assert sent, "the fault inside the undo was never reached"
        monkeypatch.setattr(owner, name, fault.fn)
        monkeypatch.setattr(Rows, "flush", flush)
        got = engine.run()
        assert got == {r: uninterrupted[r] for r in rids}
        check_rows(engine)
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_a_compiled_step_serves_the_same_tokens(toy_model):
    """compile= runs the decode step through torch.compile (here its aot_eager backend, on
    the CPU): AOTAutograd sees the step's inputs as the rows' one state tensor, and the
    tokens are the eager step's."""
    prompts = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    out = []
    for compile in (False, {"backend": "aot_eager"}):
        engine = PagedEngine(toy_model, 2, max_len=32, use_graph=False, compile=compile)
        rids = [engine.submit(p, 6) for p in prompts]
        done = engine.run()
        out.append([done[r] for r in rids])
    assert out[0] == out[1]


@pytest.mark.parametrize("capture_sizes", [(3,), "abc", (1, 2, 65), (0, 64)])
def test_bad_capture_sizes_are_refused_before_the_pools_are_allocated(
    toy_model, monkeypatch, capture_sizes
):
    allocated = []
    monkeypatch.setattr(serve_module.PagedKVCache, "allocate",
                        lambda *a, **k: allocated.append(a))  # fmt: skip
    with pytest.raises(ValueError, match="capture"):
        PagedEngine(toy_model, 64, max_len=32, use_graph=False, capture_sizes=capture_sizes)
    assert allocated == []
