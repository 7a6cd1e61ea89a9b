"""Checkers of notebook 04 · capture and replay."""

import torch

from tinyllm.course.exercises.harness import FAILED, call, choices, hint, ok

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


def check_stale_reads(answer) -> bool:
    """answer: the letters of STALE_READS that are stale, with GraphDecoder on a GPU."""
    want, got = {"a", "b", "e"}, choices(answer)
    if got - STALE_READS.keys():
        unknown = min(got - STALE_READS.keys())
        return hint(f"{unknown!r} is not one of the options {sorted(STALE_READS)}")
    if got != want:
        c = min(got ^ want)
        return hint(f"({c}) is {'stale' if c in want else 'not stale'}: {_STALE[c]}")
    return ok("a replay overwrites the static output: read or copy it before the next step")


POOL_CHOICES = {
    "a": "a private memory pool per bucket graph",
    "b": "one pool shared by all the bucket graphs, captured largest window first",
    "c": "one pool shared by all the bucket graphs, captured smallest window first",
}
_POOLS = {
    "a": "safe, but the memory is the sum of every graph's pool (see the measured bars)",
    "c": "each larger capture needs blocks the pool does not have yet, so it grows at "
    "every capture; largest first, the smaller graphs fit in what it already has",
}


def check_pool_choice(answer) -> bool:
    """answer: the letter of POOL_CHOICES that GraphDecoder uses, and rightly so."""
    got = str(answer).strip().lower()
    if got == "b":
        return ok(
            "the bucket graphs never replay at the same time, so one pool serves them "
            "all; captured largest first, the smaller ones reuse its memory"
        )
    return hint(f"({got}): {_POOLS.get(got, f'not one of the options {sorted(POOL_CHOICES)}')}")


def check_capture_replay(fn) -> bool | None:
    """GPU bonus. fn(f, example) → run(x): captures f on a static copy of example once;
    run(x) copies x in, replays the graph and returns its output."""
    if not torch.cuda.is_available():
        print("This bonus exercise needs CUDA: skipped on this machine.")
        return None
    calls = []

    def reference(x):
        return torch.sin(2 * x) + x.square().sum()

    def f(x):
        calls.append(1)
        return reference(x)

    g = torch.Generator(device="cuda").manual_seed(0)
    run = call(fn, (f, torch.randn(256, device="cuda", generator=g)), "a (256,) CUDA tensor")
    if run is FAILED:
        return False
    n_calls = len(calls)
    for i in range(3):
        x = torch.randn(256, device="cuda", generator=g)
        out = call(run, (x,), f"replay {i}")
        if out is FAILED:
            return False
        if not torch.equal(out, reference(x)):
            return hint(
                f"replay {i} differs from f(x): copy x into the static input "
                f"(static_x.copy_(x)) before graph.replay()"
            )
    if len(calls) != n_calls:
        return hint("run(x) calls f again: it should only copy x in and replay the graph")
    return ok("three replays match f bit for bit, without calling f")
