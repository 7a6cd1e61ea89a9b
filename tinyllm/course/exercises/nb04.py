"""Checkers of notebook 04 · capture and replay."""

import contextlib
import numbers

import torch

from tinyllm.course.exercises.harness import (
    FAILED,
    Verdict,
    call,
    checker,
    choices,
    hint,
    ok,
    quietly,
    shown_type,
    time_limit,
)
from tinyllm.lab import simgraph
from tinyllm.lab.results import load_results

STALE_READS = {
    "a": "`logits = dec.step(tok)`, read after the next step",
    "b": "`last = logits[:, -1]`, taken before the next step, read after it",
    "c": "`nxt = logits[:, -1].argmax(-1)`, taken before the next step, read after it",
    "d": "`saved = logits.clone()`, taken before the next step, read after it",
    "e": "`same = logits`, taken before the next step, read after it",
}
_STALE = {
    "a": "it is the graph's static output buffer, which every replay overwrites",
    "b": "indexing returns a view of the static buffer, not a copy",
    "c": "argmax runs eagerly and writes a new tensor, outside the graph's pool",
    "d": "clone() copies the values out of the static buffer",
    "e": "a second name for the same tensor, the static buffer",
}


@checker
def check_stale_reads(answer) -> Verdict:
    """answer: the letters of STALE_READS that hold the next step's values when read after
    it, with graphs (torch.cuda on a GPU, or tinyllm.lab.simgraph on a CPU)."""
    want, got = {"a", "b", "e"}, choices(answer)
    if not got:
        return hint(
            "no answer that reads as letters yet: give the letters of the stale reads, as a "
            'string such as "bd"'
        )
    if got - STALE_READS.keys():
        unknown = min(got - STALE_READS.keys())
        return hint(f"{unknown!r} is not one of the options {sorted(STALE_READS)}")
    if got != want:
        c = min(got ^ want)
        return hint(f"({c}) is {'stale' if c in want else 'not stale'}: {_STALE[c]}")
    return ok("a replay overwrites the static output: read or copy it before the next step")


POOL_CHOICES = {
    "a": "a pool per bucket graph reserves no more memory than one pool shared by all of them",
    "b": "one pool shared by all the bucket graphs reserves less memory than a pool per graph",
    "c": "captured smallest window first, the shared pool grows as the windows grow",
    "d": "the shared pool ends at the same size in both capture orders",
    "e": "captured largest window first, the shared pool ends smaller than captured smallest first",
}
_ORDERS = ("largest_first_pool_bytes", "smallest_first_pool_bytes")


def _mib(n_bytes) -> str:
    return f"{n_bytes / 2**20:.3g} MiB"


def _pool_facts(capture: dict) -> dict[str, tuple[bool, str]]:
    """letter → (does this measurement show it, the numbers that say so)."""
    separate, shared = capture["separate_pools_bytes"], capture["shared_pool_bytes"]
    if not all(isinstance(b, numbers.Real) for b in (separate, shared)):
        raise TypeError("pool sizes are numbers of bytes")
    sizes = f"a pool per graph reserves {_mib(separate)} in all, one shared pool {_mib(shared)}"
    facts = {"a": (separate <= shared, sizes), "b": (shared < separate, sizes)}
    if all(key in capture for key in _ORDERS):
        largest, smallest = (list(capture[key]) for key in _ORDERS)
        if not all(isinstance(b, numbers.Real) for b in largest + smallest):
            raise TypeError("pool sizes are numbers of bytes")
        after = ", ".join(_mib(b) for b in smallest)
        grows = any(later > earlier for earlier, later in zip(smallest, smallest[1:]))
        ends = (
            f"the shared pool ends at {_mib(largest[-1])} captured largest first and at "
            f"{_mib(smallest[-1])} captured smallest first"
        )
        facts["c"] = (grows, f"captured smallest first, the pool held {after} after each capture")
        facts["d"] = (largest[-1] == smallest[-1], ends)
        facts["e"] = (largest[-1] < smallest[-1], ends)
    return facts


@checker
def check_pool_choice(answer, capture=None) -> Verdict:
    """answer: the letters of POOL_CHOICES that the pool measurement shows. capture: that
    measurement, as section 8 of notebook 04 prints it (`cap`: measured live on a GPU, else
    the shipped recording's "capture"); None: the shipped recording's."""
    try:
        facts = _pool_facts(load_results()["capture"] if capture is None else capture)
    except Exception:  # whatever was passed as the measurement: a hint, not a traceback
        return hint(
            "capture must be the pool measurement that section 8 printed (pass `cap`), or "
            "nothing for the shipped recording's"
        )
    got = choices(answer)
    if not got:
        return hint(
            "no answer that reads as letters yet: give the letters the measurement shows, as a "
            'string such as "ab"'
        )
    if got - POOL_CHOICES.keys():
        unknown = min(got - POOL_CHOICES.keys())
        return hint(f"{unknown!r} is not one of the options {sorted(POOL_CHOICES)}")
    if got - facts.keys():
        return hint(
            f"({min(got - facts.keys())}) cannot be told from this measurement: it has no "
            "capture-order rows (`make bench` records them)"
        )
    want = {letter for letter, (shown, _) in facts.items() if shown}
    if got != want:
        c = min(got ^ want)
        verdict = "the measurement shows it too" if c in want else "the measurement shows otherwise"
        return hint(f"({c}): {verdict}: {facts[c][1]}")
    reasons = "; ".join(dict.fromkeys(why for _, why in facts.values()))
    return ok(f"the measurement shows just that: {reasons}")


# --- capture and replay a function yourself -----------------------------------------------


def _reference(x):
    return torch.sin(2 * x) + x.square().sum()


class _Watched:
    """The graph API handed to the learner's function: it passes every call through to the
    real one (torch.cuda or simgraph) and notes, in order, what happened: ("capture",);
    ("wait", waiter, waited) for a stream's wait_stream, each stream named "side" (a stream
    made by api.Stream()) or "current" (api.current_stream() outside a side stream's block);
    ("sync", who) for api.synchronize() ("device") or a stream's synchronize(); and
    ("f", capturing, on_side) for each call of f. The simulator has no streams, so the
    order of these calls is all a checker can see of them."""

    def __init__(self, api):
        self.api, self.events = api, []
        self.capturing, self.side = False, None
        watched = self

        class Stream(api.Stream):
            def wait_stream(self, stream):
                watched.events.append(("wait", "side", watched.name(stream)))
                return super().wait_stream(watched.real(stream))

            def synchronize(self):
                watched.events.append(("sync", "side"))
                return super().synchronize()

        class Current:
            """api.current_stream() outside a side stream's block."""

            def __init__(self, stream):
                self.stream = stream

            def wait_stream(self, stream):
                watched.events.append(("wait", "current", watched.name(stream)))
                return self.stream.wait_stream(watched.real(stream))

            def synchronize(self):
                watched.events.append(("sync", "current"))
                return self.stream.synchronize()

            def __getattr__(self, name):
                return getattr(self.stream, name)

        self.Stream, self.Current = Stream, Current

    def name(self, stream) -> str:
        if isinstance(stream, self.Stream):
            return "side"
        return "current" if isinstance(stream, self.Current) else "other"

    def real(self, stream):
        return stream.stream if isinstance(stream, self.Current) else stream

    def __getattr__(self, name):  # CUDAGraph, graph_pool_handle, ...
        return getattr(self.api, name)

    def current_stream(self, *args, **kwargs):
        if self.side is not None:  # inside `with api.stream(side):` the side stream is current
            return self.side
        return self.Current(self.api.current_stream(*args, **kwargs))

    @contextlib.contextmanager
    def stream(self, s):
        outer, self.side = self.side, s if isinstance(s, self.Stream) else None
        try:
            with self.api.stream(self.real(s)):
                yield
        finally:
            self.side = outer

    @contextlib.contextmanager
    def graph(self, cuda_graph, *args, **kwargs):
        self.events.append(("capture",))
        if "stream" in kwargs:  # a capture on api.current_stream(): the real stream
            kwargs["stream"] = self.real(kwargs["stream"])
        with self.api.graph(cuda_graph, *args, **kwargs):
            self.capturing = True
            try:
                yield
            finally:
                self.capturing = False

    def synchronize(self, *args, **kwargs):
        self.events.append(("sync", "device"))
        return self.api.synchronize(*args, **kwargs)

    def f(self, x):
        """The function the learner captures: notes the call, then computes."""
        self.events.append(("f", self.capturing, self.side is not None))
        return _reference(x)


def _setup_problem(events) -> str | None:
    """What is wrong with the capture, read from the events of my_capture_replay."""
    kinds = [e[0] for e in events]
    if "capture" not in kinds:
        return (
            "nothing was captured through `api`: make graph = api.CUDAGraph() and call f on "
            "the static input once inside `with api.graph(graph):`"
        )
    if not any(e[0] == "f" and e[1] for e in events):
        return (
            "f was never called inside `with api.graph(graph):`: the graph records only that block"
        )
    before = events[: kinds.index("capture")]
    warm = [i for i, e in enumerate(before) if e[0] == "f"]
    if not warm:
        return (
            "no warm-up: run f once on the static input before the capture, on a side "
            "stream, as GraphDecoder.capture_graph does"
        )
    side = [i for i in warm if before[i][2]]
    if not side:
        return (
            "the warm-up ran on the current stream: run it inside `with api.stream(side):`, "
            "with side = api.Stream()"
        )
    orders_side = (("wait", "side", "current"), ("sync", "device"))
    if not any(e in orders_side for e in before[: side[0]]):
        return (
            "the side stream does not wait for the current one: call "
            "side.wait_stream(api.current_stream()) before the warm-up (on a GPU a side "
            "stream may start before the work already queued, your copy of example, is done)"
        )
    after = before[side[-1] + 1 :]
    orders_current = (("wait", "current", "side"), ("sync", "device"), ("sync", "side"))
    if not any(e in orders_current for e in after):
        if ("wait", "side", "side") in after:
            return (
                "inside `with api.stream(side):` api.current_stream() is side itself, so that "
                "wait orders nothing: call api.current_stream().wait_stream(side) after the "
                "`with api.stream(side):` block"
            )
        return (
            "the current stream does not wait for the warm-up: call "
            "api.current_stream().wait_stream(side) after the `with api.stream(side):` block "
            "(on a GPU what you queue next may otherwise run before the warm-up is done; in "
            "the decoder, cache.restore(saved))"
        )
    return None


def _replay_problem(i: int, out, previous, example) -> str:
    """Why replay i of run(x) did not give f(x)."""
    if i > 0 and torch.equal(out, _reference(previous)):
        return f"on replay {i} run(x) gave f of the previous x: copy x in before replay()"
    if torch.equal(out, _reference(example)) or i == 1:
        return (
            "run(x) gives f(example), not f(x): the graph reads the tensor it was captured "
            "on, so copy x into it (static_x.copy_(x)) before replay() and return the output "
            "made inside the capture; rebinding a name (static_x = x) changes nothing the graph "
            "reads"
        )
    return (
        f"on replay {i} run(x) differs from f(x): copy x into the static input, call "
        f"graph.replay(), then return the output made inside `with api.graph(graph):`"
    )


def _explain_cuda(error: Exception) -> str | None:
    """torch.cuda called where api is the simulator: on a machine without CUDA it fails."""
    text = str(error)
    if "dummy base class" in text or "not compiled with CUDA" in text or "No CUDA GPUs" in text:
        return (
            "this machine has no CUDA: call the `api` you are given (api.CUDAGraph(), "
            "api.graph(...), api.Stream()), never torch.cuda itself"
        )
    return None


@checker
def check_capture_replay(fn, api=None) -> Verdict:
    """fn(f, example, api) → run(x): warms f up on a side stream, captures f once on a
    static copy of example; run(x) copies x in, replays the graph and returns the static
    output. api: torch.cuda on a GPU, else tinyllm.lab.simgraph (the default picks)."""
    if api is None:
        api = torch.cuda if torch.cuda.is_available() else simgraph
    if not all(hasattr(api, n) for n in ("CUDAGraph", "graph", "Stream", "stream",
                                         "current_stream")):  # fmt: skip
        return hint(
            f"api must be torch.cuda or tinyllm.lab.simgraph, or left out to pick the one this "
            f"machine runs; got {shown_type(api)}"
        )
    device = "cuda" if api is torch.cuda else "cpu"
    g = torch.Generator(device=device).manual_seed(0)
    example = torch.randn(256, device=device, generator=g)
    untouched = example.clone()
    watched = _Watched(api)
    with time_limit(30.0, "it ran for 30 s: capture f once, then only replay"):
        run = call(fn, (watched.f, example, watched), "f and a (256,) example",
                   explain=_explain_cuda)  # fmt: skip
    if run is FAILED:
        return False
    if not callable(run):
        return hint(f"my_capture_replay returned {type(run).__name__}: return the function run")
    problem = _setup_problem(watched.events)
    if problem and not any(e[0] == "capture" for e in watched.events):
        n_events = len(watched.events)  # no capture yet: does run(x) capture, at every call?
        quietly(run, (example.clone(),))  # whatever else run(x) does, the hint is the capture
        if any(e[0] == "capture" for e in watched.events[n_events:]):
            return hint(
                "run(x) captures a new graph at every call: capture once, in "
                "my_capture_replay, before it returns run; run(x) only copies x in and replays"
            )
    if problem:
        return hint(problem)
    n_events, first, previous, stale_at_0 = len(watched.events), None, example, False
    for i in range(3):
        x = torch.randn(256, device=device, generator=g)
        with time_limit(30.0, "it ran for 30 s: run(x) should only copy x in and replay"):
            out = call(run, (x,), f"replay {i}")
        if out is FAILED:
            return False
        if any(e[0] == "f" for e in watched.events[n_events:]):
            return hint(
                "run(x) calls f again: it should only copy x into the static input and replay"
            )
        if not isinstance(out, torch.Tensor):
            return hint(f"run(x) returned {type(out).__name__}: return the graph's output tensor")
        if i == 0 and torch.equal(out, _reference(untouched)):
            # f(example): a stale input, or x copied in after the replay? The next call tells.
            stale_at_0, previous = True, x
            continue
        if stale_at_0 or not torch.equal(out, _reference(x)):
            return hint(_replay_problem(i, out, previous, untouched))
        if first is None:
            first = out
        elif out.untyped_storage().data_ptr() != first.untyped_storage().data_ptr():
            return hint(
                "run(x) returns a new tensor each time (a copy?): return the graph's static "
                "output itself, as GraphDecoder.step does; the caller clones what it keeps"
            )
        previous = x
    if not torch.equal(example, untouched):
        return hint(
            "run(x) wrote into example: capture on a copy (static_x = example.clone()), the "
            "caller's tensor is not yours to overwrite"
        )
    return ok(
        "a warm-up on a side stream, one capture, and three replays that match f bit for bit "
        "without calling it"
    )
