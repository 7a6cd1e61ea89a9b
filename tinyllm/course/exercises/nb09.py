"""Checkers of notebook 09 · the engine around the graph."""

import inspect
import re
import traceback
import types

import numpy as np
import torch

from tinyllm import generation
from tinyllm.course.exercises.harness import (
    CALL_SECONDS,
    FAILED,
    NEW_TENSOR_UNDER_CAPTURE,
    TooSlow,
    Verdict,
    as_int,
    call,
    captured_new_tensor,
    checker,
    entered,
    exited,
    hint,
    items,
    off_device,
    ok,
    shown_type,
    time_limit,
)
from tinyllm.engine import Request
from tinyllm.generation import reference_sample, uniform_noise
from tinyllm.lab import simgraph
from tinyllm.serve import PagedEngine

CAPTURE_SECONDS = 30.0  # a learner's function under the simulator's capture


def _frozen(fn, **names):
    """fn with its module's names as they are now (names replaced): a learner who later
    patches generation.uniform_noise, say, changes what the package runs, never the
    reference a checker compares with."""
    scope = {**fn.__globals__, **names}
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


_splitmix64 = _frozen(generation.splitmix64)
_uniform_noise = _frozen(generation.uniform_noise, splitmix64=_splitmix64)
_sample = _frozen(generation.reference_sample, uniform_noise=_uniform_noise)
V = 64  # the vocabulary of the checkers' logits


def _warm_simulator() -> None:
    """One capture of nothing much, so that what the simulator loads on first use is loaded
    before a learner's function is timed."""
    x, y = torch.zeros(2), torch.ones(2)
    with simgraph.graph(simgraph.CUDAGraph()):
        x.add_(y)


def _host_read(fn, args) -> str | None:
    """The simulator's refusal, its first sentence, if fn captured on args reads a tensor's
    value on the host (.item(), int(t), `if t:`, ...); else None, whatever else happens."""
    _warm_simulator()
    try:
        with time_limit(CAPTURE_SECONDS, "too slow"), simgraph.graph(simgraph.CUDAGraph()):
            fn(*(t.clone() for t in args))
    except (Exception, TooSlow, SystemExit) as e:
        text = str(e).split("\n")[0]
        if "not permitted when stream is capturing" in text and "on the host" in text:
            return f"{type(e).__name__}: {text.split('. ')[0]}"
    return None


def _captured(fn, args, shown_as: str, what: str):
    """Capture fn(*args) under the simulator: (graph, output), or FAILED after a hint."""
    _warm_simulator()
    graph = simgraph.CUDAGraph()
    try:
        with time_limit(
            CAPTURE_SECONDS, f"your function did not finish within {CAPTURE_SECONDS:g} s"
        ):
            with simgraph.graph(graph):
                out = fn(*args)
    except TooSlow as e:
        hint(f"under capture, {shown_as}: {e}")
        return FAILED
    except SystemExit:
        hint(exited(f"{shown_as}, under capture,"))
        return FAILED
    except Exception as e:
        first = str(e).split("\n")[0]
        why = first.split(". ")[0][:160]
        if captured_new_tensor(e):
            hint(f"captured on {shown_as}, your function failed: {NEW_TENSOR_UNDER_CAPTURE}")
            return FAILED
        if "output shape depends on the data" in first:  # simgraph's reason for nonzero, x[mask]
            what = (
                "its output shape depends on the data (a boolean mask, nonzero), and a graph "
                "replays fixed shapes: choose between rows with torch.where instead"
            )
        hint(f"captured on {shown_as}, your function failed ({type(e).__name__}: {why}): {what}")
        return FAILED
    return graph, out


# --- exercise 1: the step's sampling, on the device -----------------------------------------

HOST_READ = (
    "it reads a tensor's value on the host (.item(), int(t), .tolist(), or a Python `if` on a "
    "tensor), which waits for the GPU and cannot be captured: pick greedy or sampled rows "
    "with torch.where, on the device"
)
TEMPERATURES = (0.0, 0.3, 1.0, 3.0, 0.0, 0.5, 2.0, 1.5)  # wide apart: t and 1/t rarely agree
EAGER_CASES = (0, 1, 3)  # run as they are
TIE_CASE = 3  # its greedy rows hold an exact tie of their two best logits (bf16 ties often)
CAPTURE_CASE, REPLAY_CASES = 2, (4, 5)  # captured on one, replayed on the others
# (case 2 is the captured one: the solutions notebook's stored hint names it)


NEAR_TIE = 1e-3  # a greedy row's runner-up, this far below its best logit


def _sampling_case(seed=0):
    """logits, temperature, seed, position of B rows. In each greedy row the runner-up id
    is the one whose Gumbel noise is largest, NEAR_TIE below the best logit: noise added to
    a greedy row, at any scale (a temperature clamped to 0.2, say), picks it instead. In
    TIE_CASE an earlier id ties with it, above the rest: argmax takes the earlier, noise at
    any scale, even a temperature clamped to 1e-6, the runner-up."""
    g = torch.Generator().manual_seed(seed)
    B = len(TEMPERATURES)
    logits = torch.randn(B, V, generator=g) * 2
    temperature = torch.tensor(TEMPERATURES).roll(seed)  # the greedy rows move case to case
    seeds = torch.randint(0, 2**40, (B,), generator=g)
    position = torch.randint(5, 200, (B,), generator=g)
    gumbel = -torch.log(-torch.log(_uniform_noise(seeds, position, V)))
    for r in (temperature == 0).nonzero().flatten().tolist():
        best = int(logits[r].argmax())
        runner_up = int(gumbel[r].index_fill(0, torch.tensor([best]), -float("inf")).argmax())
        logits[r, runner_up] = logits[r, best] - NEAR_TIE
        if seed == TIE_CASE:  # an exact tie: argmax takes the first id, the noise the other
            first = int(gumbel[r, :runner_up].argmin())
            logits[r, first] = logits[r, runner_up] = logits[r, best] + 1
    return logits, temperature, seeds, position


MODEL_V = 258  # the shipped model's vocabulary: a second size, so V must come from the logits
MODEL_SHOWN = f"a case of {MODEL_V} vocabulary ids"


def _model_v_problem(fn):
    """fn on rows of TEMPERATURES over MODEL_V ids: a problem, None when its ids are right, or
    FAILED (hinted). Every other case has V ids, so a V of the learner's own passes them."""
    g = torch.Generator().manual_seed(0)
    B = len(TEMPERATURES)
    case = (torch.randn(B, MODEL_V, generator=g) * 2, torch.tensor(TEMPERATURES),
            torch.randint(0, 2**40, (B,), generator=g),
            torch.randint(5, 200, (B,), generator=g))  # fmt: skip
    return _eager_problem(
        fn,
        case,
        MODEL_SHOWN,
        wrong_ids=(
            f"on {MODEL_SHOWN}, where the other cases have {V}, your function's ids differ from "
            f"generation.sample's: take V from the logits, logits.shape[-1], wherever it is used"
        ),
    )


def _reference_sample(logits, temperature, seed, position):
    return _sample(logits, temperature, torch.zeros_like(seed), seed, position)


def _gumbel(seed, position) -> torch.Tensor:
    return -torch.log(-torch.log(_uniform_noise(seed, position, V)))


SLIPS = {  # what a learner's sampled rows may be instead, and what it says
    "the noise subtracted": (
        lambda x, t, s, p: x / t - _gumbel(s, p),
        "the Gumbel noise is added, logits / temperature + g, with g = -log(-log(u))",
    ),
    "the next position's noise": (
        lambda x, t, s, p: x / t + _gumbel(s, p + 1),
        "the noise is drawn at `position` as given, the token being drawn: not position + 1",
    ),
    "the previous position's noise": (
        lambda x, t, s, p: x / t + _gumbel(s, p - 1),
        "the noise is drawn at `position` as given, the token being drawn: not position - 1",
    ),
    "the logits multiplied": (
        lambda x, t, s, p: x * t + _gumbel(s, p),
        "divide the logits by the temperature, not multiply: logits / temperature + g",
    ),
    "the temperature not applied": (  # or (logits + g) / temperature: the same argmax
        lambda x, t, s, p: x + _gumbel(s, p),
        "the temperature changed nothing: these are the ids of logits + g, as if every "
        "temperature were 1. It was left out, or it divides logits + g as a whole, which "
        "moves no argmax. Divide the logits alone, then add the noise: logits / temperature "
        "+ g",
    ),
    "seed and position swapped": (
        lambda x, t, s, p: x / t + _gumbel(p, s),
        "uniform_noise takes (seed, position, vocab_size), in that order",
    ),
    "the seed left out": (
        lambda x, t, s, p: x / t + _gumbel(torch.zeros_like(s), p),
        "the noise is keyed by the request's seed too, uniform_noise(seed, position, V): "
        "without it, every request draws the same noise at a position",
    ),
    "the row's noise": (
        lambda x, t, s, p: x / t + _gumbel(s, torch.arange(len(s))),
        "the noise is keyed by the row, torch.arange(B), not by the token's position: a row "
        "would draw the same noise at every step, and a request moved to another row other "
        "noise. Draw it at `position` as given",
    ),
    "the uniforms added": (
        lambda x, t, s, p: x / t + _uniform_noise(s, p, V),
        "the uniforms u themselves were added, where the noise is g = -log(-log(u)): u lies "
        "in (0, 1), too narrow to move most picks off the argmax. Add g",
    ),
    "one log": (
        lambda x, t, s, p: x / t - torch.log(_uniform_noise(s, p, V)),
        "the noise is -log(u), one log, where Gumbel noise takes two: g = -log(-log(u))",
    ),
}


def _slip(fn) -> str | None:
    """The one slip of SLIPS that fn's sampled rows follow on every eager case: its
    explanation, or None if none does, or more than one (two slips can pick the same ids on
    one case, so one case alone may name the wrong one)."""
    left = dict(SLIPS)
    for seed in EAGER_CASES:
        logits, temperature, seed_, position = case = _sampling_case(seed)
        try:
            with time_limit(CALL_SECONDS, "too slow"):
                got = fn(*(t.clone() for t in case))
        except (Exception, TooSlow):  # the hint already given stands
            return None
        if not isinstance(got, torch.Tensor) or got.shape != temperature.shape:
            return None
        sampled = temperature > 0
        t = torch.where(sampled, temperature, 1.0)[:, None]
        ids = got.long()[sampled]
        left = {
            name: (formula, why)
            for name, (formula, why) in left.items()
            if torch.equal(ids, formula(logits, t, seed_, position).argmax(-1)[sampled])
        }
    return next(iter(left.values()))[1] if len(left) == 1 else None


def _divided_by_zero(case, r: int) -> int:
    """The id row r draws when its temperature of 0 divides its logits, noise added."""
    logits, _, seed, position = case
    return int((logits[r] / 0.0 + _gumbel(seed[r : r + 1], position[r : r + 1])[0]).argmax())


def _swapped(got, case) -> bool:
    """Whether got is the right answer with torch.where's branches swapped: each greedy row
    the noisy pick (as at temperature 1), each other row the argmax."""
    logits, temperature, seed, position = case
    greedy = temperature == 0
    t = torch.where(greedy, 1.0, temperature)[:, None]
    noisy = (logits / t + _gumbel(seed, position)).argmax(-1)
    return torch.equal(got, torch.where(greedy, noisy, logits.argmax(-1)))


def _ids_problem(got, want, case, shown_as, fn=None, noise_called=True) -> str | None:
    """What is wrong with ids got (want: the reference's) on case, or None. noise_called:
    whether the learner's function called uniform_noise."""
    temperature = case[1]
    if not isinstance(got, torch.Tensor):
        return (
            f"on {shown_as} your function returned {shown_type(got)}: return a tensor of ids (B,)"
        )
    if got.shape != want.shape:
        return (
            f"on {shown_as} your function returned shape {tuple(got.shape)}, expected "
            f"{tuple(want.shape)}: one id per row"
        )
    if got.dtype.is_floating_point or got.dtype == torch.bool or got.dtype.is_complex:
        return f"on {shown_as} your function returned {got.dtype} ids: return integer ids"
    if torch.equal(got.long(), want):
        return None
    r = int((got.long() != want).nonzero()[0])
    t = float(temperature[r])
    logits = case[0]
    past = got.long() >= logits.shape[-1]
    if bool(past.any()):
        r = int(past.nonzero()[0])
        return (
            f"on {shown_as} row {r} got id {int(got[r])}, past the vocabulary of "
            f"{logits.shape[-1]} ids: an argmax without dim= takes the flat index over the "
            f"whole batch. Take the argmax over the vocabulary of each row: argmax(-1)"
        )
    if _over_the_rows(got, case):
        return (
            f"on {shown_as} row {r} (temperature {t:g}) got id {int(got[r])}, expected "
            f"{int(want[r])}: {int(got[r])} is a row number, the row of the largest value in "
            f"column {r}, as is every wrong id. Take the {OVER_THE_ROWS}"
        )
    if _swapped(got.long(), case):
        return (
            f"on {shown_as} row {r} (temperature {t:g}) got id {int(got[r])}, expected "
            f"{int(want[r])}: every greedy row took the noisy pick and every other row the "
            f"argmax. The branches of torch.where are swapped: torch.where(temperature == 0, "
            f"the argmax, the noisy pick)"
        )
    tie = bool((logits[r] == logits[r].max()).sum() > 1)
    near = ("an id that ties with the best logit" if tie
            else f"its runner-up is {NEAR_TIE:g} below the best and")  # fmt: skip
    if t == 0 and _divided_by_zero(case, r) == int(got[r]) != int(want[r]):
        return (
            f"on {shown_as} row {r} (temperature 0) got id {int(got[r])}, expected "
            f"{int(want[r])}: it was divided by its temperature of 0, and logits / 0 are "
            f"infinities, whose argmax is no greedy pick. Divide by "
            f"torch.where(temperature == 0, 1.0, temperature), and pick greedy rows with "
            f"torch.where"
        )
    slip = _slip(fn) if fn is not None else None
    if t == 0 and slip is not None:  # the sampled rows' slip, which reached this row too
        return (
            f"on {shown_as} row {r} (temperature 0) got id {int(got[r])}, expected "
            f"{int(want[r])}. Here: {slip}"
        )
    if t == 0:
        return (
            f"on {shown_as} row {r} (temperature 0) got id {int(got[r])}, expected "
            f"{int(want[r])}: a row at temperature 0 takes the argmax of its logits, with no "
            f"noise. Here {near} draws the larger noise: add none to a greedy row, at any "
            f"scale (a temperature clamped above 0 is noise too), and pick greedy rows with "
            f"torch.where"
        )
    wrong = (got.long() != want) & (temperature > 0)
    if slip is None and torch.equal(got.long()[wrong], case[0].argmax(-1)[wrong]):
        slip = (
            f"id {int(got[r])} is the row's argmax, a greedy row's choice, and so is every "
            f"wrong id of a sampled row. Every row whose temperature is above 0 samples; only "
            f"temperature 0 is greedy"
        )
    if slip is None and not noise_called:
        slip = (
            "uniform_noise(seed, position, V) was never called, so the noise is not the "
            "request's: the same (seed, position) must draw the same token on every run"
        )
    return (
        f"on {shown_as} row {r} (temperature {t:g}) got id {int(got[r])}, expected "
        f"{int(want[r])}: a sampled row takes the argmax of logits / temperature + Gumbel "
        f"noise, the noise -log(-log(u)) of u = uniform_noise(seed, position, V)"
        + (f". Here: {slip}" if slip else "")
    )


def _case_shown(seed) -> str:
    temperatures = ", ".join(f"{t:g}" for t in _sampling_case(seed)[1].tolist())
    return f"case {seed} (temperatures [{temperatures}])"


def _read_only(example: str) -> str:
    """Why an input may not be changed in place, with an example fitting the exercise."""
    return (
        f"the step reads these buffers at every replay (they are the decoder's own), so a "
        f"function that changes them changes every later step. Make new tensors: {example}"
    )


def _changed(names, now, before) -> str | None:
    """The name of the first input that fn changed in place, or None."""
    return next((n for n, a, b in zip(names, now, before) if not torch.equal(a, b)), None)


OWN_SAMPLER = (
    "your function calls the package's own sampler, generation.sample or reference_sample: "
    "this exercise is to write it. Take the argmax of logits / temperature + g, with "
    "g = -log(-log(u)), and pick the greedy rows with torch.where"
)


OVER_THE_ROWS = "argmax over the vocabulary, dim=-1: argmax(0) takes it over the rows"


def _square_case():
    """A case of as many rows as vocab ids (B == V): a function that takes the argmax over
    the rows (argmax(0), shape (V,)) runs on it without an error of shapes."""
    g = torch.Generator().manual_seed(12)
    temperature = torch.tensor(TEMPERATURES).repeat(V // len(TEMPERATURES))
    logits = torch.randn(V, V, generator=g) * 2
    seed = torch.randint(0, 2**40, (V,), generator=g)
    position = torch.randint(5, 200, (V,), generator=g)
    return logits, temperature, seed, position


def _over_the_rows(got, case) -> bool:
    """Whether got's wrong ids (three or more) are, each, the argmax of the logits' or the
    scores' column of that row's number: an argmax taken over the batch, argmax(0)."""
    logits, temperature, seed, position = case
    B = len(temperature)
    if not isinstance(got, torch.Tensor) or got.shape != (B,) or got.dtype.is_complex:
        return False
    want = _reference_sample(*case)
    wrong = got.long() != want
    if int(wrong.sum()) < 3 or B > logits.shape[-1]:
        return False
    g = _gumbel(seed, position)
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    raw = temperature[:, None]  # a greedy row's logits / 0 are infinities: its column's pick
    columns = torch.stack([x.argmax(0) for x in (logits, logits / t + g, logits / raw + g)])
    return bool(((got.long() == columns[:, :B]).any(0) | ~wrong).all())


def _runs_over_the_rows(fn) -> bool:
    """Whether fn, run on the square case, takes its argmax over the rows."""
    try:
        with time_limit(CALL_SECONDS, "too slow"):
            got = fn(*_square_case())
    except (Exception, TooSlow, SystemExit):
        return False
    return _over_the_rows(got, _square_case())


def _explain_sampling(error: Exception, noise_calls=(), shape=None, fn=None) -> str | None:
    """noise_calls: uniform_noise's arguments, one dict a call, as the learner's function made
    them; shape: (B, V) of the case's logits; fn: the learner's function, run again on a
    square case to tell an argmax over the rows."""
    if isinstance(error, RuntimeError) and "Boolean value of Tensor" in str(error):
        return (
            "an `if` on a tensor of several rows cannot choose for each row. Compute both, "
            "then pick per row: torch.where(temperature > 0, sampled, greedy)"
        )
    if "not implemented for" in str(error) and any(op in str(error) for op in ("bitwise", "shift")):
        return (
            "uniform_noise mixes the bits of integers, with xor and shifts: pass seed and "
            "position as given, int64 tensors, not floats"
        )
    if isinstance(error, RuntimeError) and "must match the size" in str(error):
        B, vocab_size = shape
        wrong_v = [c["vocab_size"] for c in noise_calls
                   if as_int(c["vocab_size"]) != vocab_size]  # fmt: skip
        if wrong_v:
            which = ("logits.shape[0] is the batch" if as_int(wrong_v[0]) == B
                     else "take V from the logits, logits.shape[-1], not from a number of "
                     "your own")  # fmt: skip
            return (
                f"uniform_noise(seed, position, V) makes one uniform per id of the vocabulary, "
                f"so V is logits.shape[-1] = {vocab_size}. You passed {wrong_v[0]!r}; {which}"
            )
        sizes = re.search(r"tensor a \((\d+)\) .* tensor b \((\d+)\) .* dimension (\d+)",
                          str(error))  # fmt: skip
        one_per_id = sizes is not None and sizes[3] == "0" and {int(sizes[1]), int(sizes[2])} == {
            B, vocab_size}  # fmt: skip
        if one_per_id or (fn is not None and _runs_over_the_rows(fn)):
            return (
                f"take the {OVER_THE_ROWS}, one id per vocab id (V,), where torch.where "
                f"wants one per row (B,)"
            )
        return (
            "logits are (B, V) and temperature is (B,): divide by temperature[:, None], shape "
            "(B, 1), so that each row is divided by its own temperature"
        )
    return None


def _eager_problem(fn, case, shown_as, wrong_ids=None):
    """fn run on a copy of case: a problem, None when its ids are right, or FAILED (hinted).
    A function that calls generation.sample is a problem whatever it returns. wrong_ids: the
    problem given for wrong ids, where the case's vocabulary is not V and no slip is named."""
    want = _reference_sample(*case)
    given = tuple(t.clone() for t in case)
    calls = []

    def explain(error):
        noise_calls = [args for f, args in calls if f is uniform_noise]
        return _explain_sampling(error, noise_calls, tuple(case[0].shape), fn)

    with entered(reference_sample, uniform_noise, calls=calls) as ran:
        got = call(fn, given, shown_as, seconds=CALL_SECONDS, explain=explain)
    if got is FAILED:
        return FAILED
    if ran[reference_sample]:
        return OWN_SAMPLER
    changed = _changed(("logits", "temperature", "seed", "position"), given, case)
    if changed:
        why = _read_only("x / t, not x.div_(t)")
        return f"on {shown_as} your function changed its input {changed}: {why}"
    if wrong_ids is not None:  # no slip named: the slips' noise has V ids
        right = isinstance(got, torch.Tensor) and got.shape == want.shape
        return None if right and torch.equal(got.long(), want) else wrong_ids
    return _ids_problem(got, want, case, shown_as, fn, noise_called=bool(ran[uniform_noise]))


@checker
def check_step_sampling(fn) -> Verdict:
    """fn(logits (B, V), temperature (B,), seed (B,), position (B,)) → ids (B,): greedy rows
    (temperature 0) take the argmax, the others Gumbel-max with uniform_noise(seed,
    position), as generation.sample does (top_k aside). Run eagerly, then captured under the
    CPU graph simulator and replayed on new values: no host read may be in it. The exercise
    is to write it: a function that calls generation.sample is refused (harness.entered)."""
    for seed in EAGER_CASES:
        problem = _eager_problem(fn, _sampling_case(seed), _case_shown(seed))
        if problem is FAILED:
            return False
        wrong_ids = isinstance(problem, str) and problem.startswith(f"on {_case_shown(seed)} row")
        read = _host_read(fn, _sampling_case(seed)) if wrong_ids else None
        if read:  # the host read first: it is what capture refuses, whatever the formula
            return hint(
                f"captured on {_case_shown(seed)}, your function failed ({read}): {HOST_READ}. "
                f"Its ids are wrong too: {problem.removeprefix(f'on {_case_shown(seed)} ')}"
            )
        if problem:
            return hint(problem)
    static = [t.clone() for t in _sampling_case(CAPTURE_CASE)]
    done = _captured(fn, static, _case_shown(CAPTURE_CASE), HOST_READ)
    if done is FAILED:
        return False
    graph, out = done
    if not isinstance(out, torch.Tensor):
        return hint(
            f"under capture your function returned {shown_type(out)}: return the ids tensor"
        )
    for seed in REPLAY_CASES:
        new = _sampling_case(seed)
        for buf, value in zip(static, new):
            buf.copy_(value)
        graph.replay()
        want = _reference_sample(*new)
        if out.shape == want.shape and torch.equal(out.long(), want):
            continue
        # wrong on replay: first see whether it is wrong eagerly too (then the formula is)
        problem = _eager_problem(fn, new, _case_shown(seed))
        if problem is FAILED:
            return False
        if problem:
            return hint(problem)
        return hint(
            f"captured on case {CAPTURE_CASE} and replayed on new logits, temperatures, seeds "
            f"and positions, the ids are those of the values it was captured with: the graph "
            f"replays what was read on the host. Compute every row's choice with tensor ops "
            f"from the buffers"
        )
    other_v = _model_v_problem(fn)
    if other_v is FAILED:
        return False
    if other_v:
        return hint(other_v)
    away = off_device(fn, _sampling_case(CAPTURE_CASE), "logits.device")
    if away:
        on = _case_shown(CAPTURE_CASE)
        return hint(f"on {on}, with every tensor on the device, your function {away}")
    return ok("greedy and sampled rows chosen on the device: the step captures and replays")


# --- exercise 2: handing one late-read step's ids to their requests ---------------------------

EOS = 3


def _requests():
    """Rows of one step, read a step late: each case's (reqs, ids) and what it tests. In the
    last, the request that finishes is not in the row of its rid: returning rows is seen."""

    def req(rid, out, max_new):
        return Request(rid, [1, 2], max_new, out=list(out))

    return [
        ([req(0, [7], 4), req(1, [8, 9], 4), None], [5, 6, 11],
         "two running requests and a pad row"),
        ([req(0, [7, 8, 9], 4), req(1, [8], 4)], [5, EOS],
         "request 0 reaches max_new_tokens now, request 1 emits EOS now"),
        ([req(0, [7, 8, 9, 10], 4), req(1, [8], 4)], [5, 6],
         "request 0 finished at max_new_tokens 4 in the step before"),
        ([req(0, [7, 8, 9, 10], 4), req(1, [8], 4)], [EOS, 6],
         "request 0 finished at max_new_tokens 4 in the step before; its extra id now is EOS"),
        ([req(0, [7, EOS], 9), req(1, [8], 4)], [5, 6],
         "request 0 emitted EOS (3) in the step before"),
        ([req(1, [], 2), None, req(0, [4], 2)], [9, 13, 17],
         "a request's first token, a pad row between two requests"),
        ([req(2, [7], 4), req(0, [8], 4), req(1, [9], 4)], [20, 21, EOS],
         "after compaction: request 2 in row 0, request 0 in row 1, request 1 in row 2"),
        ([req(0, [7], 4), req(1, [8], 4)], [0, 6], "eos_id 0: request 0 emits it now"),
        ([req(0, [7, 0], 4), req(1, [8], 4)], [5, 6],
         "eos_id 0: request 0 emitted it the step before, so its id now is the extra one"),
        ([req(0, [7, 8], 3), req(1, [8], 4)], [EOS, 6],
         "request 0 emits EOS as its last allowed token"),
        ([req(0, [], 1), req(1, [], 4)], [EOS, 5],
         "request 0 takes its only token, request 1 its first: both first tokens"),
        ([req(0, [7], 4), req(1, [8], 4)], [5, int("1000")],
         "eos_id 1000: request 1 emits it now"),  # an int of its own: `is` is not ==
        ([req(0, [7, 8], 4), req(1, [9], 4)], [8, 6],
         "request 0 draws 8 twice in a row, as 'hello' has two l's"),
        ([req(0, [7, 8, 9], 4), req(1, [8], 4)], [5, EOS],
         "eos_id None: no EOS (the engine's default), request 0 reaches max_new_tokens now, "
         "request 1's id 3 ends nothing"),
        ([req(0, [7], 4), req(1, [8], 4)], [0, 6],
         "eos_id None: request 0 draws id 0, which ends nothing"),
    ]  # fmt: skip


def _reference_hand_out(reqs, ids, eos_id):
    finished = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        done = len(req.out) == req.max_new_tokens or (bool(req.out) and req.out[-1] == eos_id)
        if done:  # its end was seen one step late: this token is the extra one, dropped
            continue
        req.out.append(token_id)
        if token_id == eos_id or len(req.out) == req.max_new_tokens:
            finished.append(req.rid)
    return finished


OWN_HAND_OUT = (
    "your function calls PagedEngine.hand_out, the package's own: this exercise is to write "
    "it. Go over the rows one at a time, for req, token_id in zip(reqs, ids)"
)


def _raised_at(error: Exception, text: str) -> bool:
    """Whether the line that raised error (the learner's, the last frame) holds text."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and text in (frames[-1].line or "")


def _explain_hand_out(error: Exception, eos_id=EOS) -> str | None:
    if isinstance(error, TypeError) and eos_id is None and "NoneType" in str(error):
        return (
            "eos_id is None, the engine's default when it has no EOS: then no request "
            "finishes by EOS. Compare token_id == eos_id, which is False for None; never convert "
            "eos_id (int(eos_id)) or order it"
        )
    if isinstance(error, AttributeError) and "'int' object has no attribute" in str(error):
        return (
            "an id is an int, and a request is reqs[i]: take them in that order, "
            "for req, token_id in zip(reqs, ids)"
        )
    if isinstance(error, AttributeError) and "'NoneType' object has no attribute 'out'" in str(
        error
    ):
        return (
            "reqs[i] is None for a padded row, which holds no request: skip it (if req is "
            "None: continue), and its id with it"
        )
    if isinstance(error, IndexError) and _raised_at(error, "[-1]"):
        return (
            "on a request's first token its out is still empty, so req.out[-1] does not "
            "exist: test `req.out and req.out[-1] == eos_id`"
        )
    if isinstance(error, TypeError) and "'int' object is not iterable" in str(error):
        return "an id is one int, not a list of them: req.out.append(token_id), not extend or +="
    return None


def _length_slip(reqs, ref, rids, want_finished, eos) -> str | None:
    """When every rid that rids miss or add is a request at its length limit, or one token
    short of it, with no EOS: what the finish test got wrong (off by one), else None."""
    missing, extra = set(want_finished) - set(rids), set(rids) - set(want_finished)
    said = []
    for r, w in zip(reqs, ref):
        if r is None or r.rid not in missing | extra:
            continue
        n, held = w.max_new_tokens, len(w.out)
        if w.out[-1:] == [eos] or held != (n if r.rid in missing else n - 1):
            return None  # finished by EOS, or not near its limit: not the length test
        said.append(
            f"request {r.rid}'s out now holds {held} ids, its max_new_tokens, so it finishes now"
            if r.rid in missing
            else f"request {r.rid}'s out holds {held} ids, one short of its max_new_tokens "
            f"{n}, so it runs on"
        )
    return said[0] if said and len(said) == len(missing | extra) else None


def _stopped_early(reqs, ref, before) -> bool:
    """Whether the loop stopped (break) at a padded row or a request finished before: every
    row before it as the reference has it, every request after it unchanged, though one of
    them should have changed."""
    for j, (w, b) in enumerate(zip(ref, before)):
        if w is not None and w.out != b:
            continue
        try:
            done = all(r is None or r.out == w.out for r, w in zip(reqs[:j], ref[:j]))
            after = [(r.out, w.out, b) for r, w, b in zip(reqs[j + 1 :], ref[j + 1 :],
                     before[j + 1 :]) if r is not None]  # fmt: skip
            return done and all(o == b for o, _, b in after) and any(w != b for _, w, b in after)
        except Exception:  # an out that cannot be compared
            return False
    return False


def _outs_after(fn, reqs, ids) -> list | None:
    """Each request's out after fn hands out ids on a fresh step of reqs, as lists of ints;
    None if fn raised, ran too long or left an out of another kind (safe to compare)."""
    try:
        with time_limit(CALL_SECONDS, "too slow"):
            fn(reqs, ids, EOS)
    except (Exception, TooSlow):
        return None
    outs = [r.out for r in reqs]
    if all(type(o) is list and all(type(x) is int for x in o) for o in outs):
        return outs
    return None


def _running(n: int) -> list:
    """n requests that run on: one token each so far, none finishing this step."""
    return [Request(i, [1, 2], 9, out=[7]) for i in range(n)]


def _ends_after_one_row(fn) -> bool:
    """Whether fn, on three running requests, hands out row 0's id alone: a return inside
    its loop ends it after the first row."""
    return _outs_after(fn, _running(3), [5, 6, 11]) == [[7, 5], [7], [7]]


def _skips_a_running_row(fn) -> bool:
    """Whether fn, on four running requests, leaves some row's out as it was while it
    appends to another: its loop never visits that row."""
    outs = _outs_after(fn, _running(4), [5, 6, 11, 12])
    return outs is not None and [7] in outs and any(
        out == [7, i] for out, i in zip(outs, (5, 6, 11, 12)))  # fmt: skip


def _appends_to_done_only(fn) -> bool:
    """Whether fn, on a fresh step where request 0 finished the step before and request 1
    runs, appends to request 0 alone: its test for a done request is inverted."""
    reqs = [Request(0, [1, 2], 4, out=[7, 8, 9, 10]), Request(1, [1, 2], 4, out=[8])]
    return _outs_after(fn, reqs, [5, 6]) == [[7, 8, 9, 10, 5], [8]]


@checker
def check_hand_out(fn) -> Verdict:
    """fn(reqs, ids, eos_id) appends each row's id (ids[i], an int) to reqs[i].out (an
    engine Request; None: a padded row) unless that request had finished already (its end
    seen one step late: the extra token is dropped), and returns the rids of the requests
    that finish with this step, as PagedEngine.hand_out does."""
    for reqs, ids, shown_as in _requests():
        eos = {"eos_id 0": 0, "eos_id 1000": int("1000"), "eos_id None": None}
        eos = eos.get(shown_as.split(":")[0], EOS)
        ref = [None if r is None else Request(r.rid, r.prompt, r.max_new_tokens, out=list(r.out))
               for r in reqs]  # fmt: skip
        want_finished = _reference_hand_out(ref, ids, eos)
        before = [None if r is None else list(r.out) for r in reqs]
        given, given_reqs = list(ids), list(reqs)
        with entered(PagedEngine.hand_out) as ran:
            got = call(fn, (given_reqs, given, eos), shown_as, none_ok=True,
                       seconds=CALL_SECONDS, explain=lambda e, eos=eos, ran=ran: (
                           OWN_HAND_OUT if ran[PagedEngine.hand_out]
                           else _explain_hand_out(e, eos)))  # fmt: skip
        if got is FAILED:
            return False
        if ran[PagedEngine.hand_out]:
            return hint(OWN_HAND_OUT)
        if len(given_reqs) != len(reqs) or any(a is not b for a, b in zip(given_reqs, reqs)):
            return hint(
                f"on {shown_as}: your function changed the list reqs (removed, added or "
                f"replaced a row): row i must stay reqs[i], since the engine reads the rows "
                f"after you. Change each request's out, never the list"
            )
        if given != ids:
            return hint(
                f"on {shown_as}: your function changed its input ids, from {ids} to {given}: "
                f"the ids are the step's, and other code reads them too. Read ids[i], never "
                f"pop or change the list"
            )
        if inspect.isgenerator(got) and inspect.isgeneratorfunction(fn):
            return hint(
                f"on {shown_as}: your function is a generator (it yields), so its body never "
                f"ran. Append the ids, then return the finished rids as a list"
            )
        if inspect.isgenerator(got):
            return hint(
                f"on {shown_as}: your function returned a generator, which gives its rids only "
                f"once, to whoever reads it first. Return them as a list: [ ... ], not ( ... )"
            )
        for i, (r, w, b) in enumerate(zip(reqs, ref, before)):
            if r is None:
                continue
            out = items(r.out)
            if out is not None and any(type(x) is not int for x in out):
                bad = next(x for x in out if type(x) is not int)
                return hint(
                    f"on {shown_as}: request {r.rid}'s out holds {shown_type(bad)}: append "
                    f"Python ints (ids.tolist() or int(...)), as the engine's out and the "
                    f"tokenizer expect"
                )
            try:
                same = isinstance(r.out, list) and r.out == w.out
            except Exception:  # what was appended cannot even be compared
                same = False
            if not same:
                got_out = shown_type(r.out) if not isinstance(r.out, list) else r.out
                try:  # no request's out changed at all
                    unchanged = (
                        isinstance(r.out, list)
                        and r.out == b
                        and all(x is None or x.out == y for x, y in zip(reqs, before))
                    )
                except Exception:  # another row's out cannot even be compared
                    unchanged = False
                if isinstance(r.out, list) and len(r.out) > len(w.out) > len(b):
                    why = (
                        f"request {r.rid} took {len(r.out) - len(b)} ids this step. Each row "
                        f"takes exactly one, its own: append ids[i] to reqs[i].out, one int, "
                        f"not the list"
                    )
                elif isinstance(r.out, list) and len(r.out) > len(w.out):
                    why = (
                        f"request {r.rid} had finished in the step before (its end is seen "
                        f"one step late), so its row ran once more: that extra token must be "
                        f"dropped"
                    ) + (
                        ". Its last id is eos_id 0, and 0 is an id too: compare with ==, "
                        "never test eos_id's truth"
                        if eos == 0 and w.out[-1:] == [0]
                        else ""
                    )
                elif _stopped_early(reqs, ref, before):
                    why = (
                        "the loop stopped early: rows after a done request (or a padded row) "
                        "were skipped; use continue, not break, to pass over one row"
                    )
                elif _ends_after_one_row(fn):
                    why = (
                        "the loop ended part way: the rows after one row kept their out. A "
                        "return inside the loop ends it at the first row that returns; return "
                        "the finished rids once, after the loop"
                    )
                elif unchanged and _appends_to_done_only(fn):
                    why = (
                        "running requests got no token while done ones did: the done test is "
                        "inverted. Skip (continue) a request that has finished, reached "
                        "max_new_tokens or ended with eos_id, and append to every other"
                    )
                elif unchanged:
                    why = (
                        "no request's out changed: append to req.out itself, the request's "
                        "own list. What is appended to a copy is lost"
                    )
                elif (isinstance(r.out, list) and r.out == b and len(w.out) > len(b)
                      and _skips_a_running_row(fn)):  # fmt: skip
                    why = (
                        f"row {i} was never visited: its request kept its out while other rows "
                        f"changed. Loop over every row: for req, token_id in zip(reqs, ids)"
                    )
                elif (isinstance(r.out, list) and len(r.out) < len(w.out)
                      and eos is not None and w.out[-1] == eos):  # fmt: skip
                    why = (
                        f"request {r.rid} drew eos_id this step: that id is its last token, and "
                        f"it belongs in out. Append it, then report the request finished"
                    )
                elif (isinstance(r.out, list) and len(r.out) < len(w.out)
                      and w.out[-2:-1] == w.out[-1:]):  # fmt: skip
                    why = (
                        "a repeated id is a new token. The extra token is known by its request "
                        "being done already, not by its value"
                    )
                elif isinstance(r.out, list) and len(r.out) < len(w.out):
                    why = f"request {r.rid} was still running: its token is a real one, keep it"
                elif (
                    isinstance(r.out, list)
                    and (k := sum(x is not None for x in reqs[:i])) != i
                    and r.out[-1:] == ids[k : k + 1]
                ):
                    why = (
                        f"it got ids[{k}], the id of row {k}. Request {r.rid} runs in row {i}: "
                        f"a pad row was skipped in reqs but not in ids. Keep reqs[i] and ids[i] "
                        f"together, for req, token_id in zip(reqs, ids), then skip a None req"
                    )
                elif (
                    isinstance(r.out, list) and r.rid != i and r.out[-1:] == ids[r.rid : r.rid + 1]
                ):
                    why = (
                        f"it got ids[{r.rid}], the id of row {r.rid}. Request {r.rid} runs in "
                        f"row {i}: after compaction rows are not rids, so row i's id is ids[i]"
                    )
                else:
                    why = (
                        "append ids[i], row i's own id, to reqs[i].out: for req, token_id in "
                        "zip(reqs, ids)"
                    )
                return hint(
                    f"on {shown_as}: request {r.rid}'s out went from {b} to {got_out}, "
                    f"expected {w.out}: {why}"
                )
        if isinstance(got, np.ndarray) and got.ndim == 1:  # as hand_out itself returns them
            got = got.tolist()
        rids = items(got, (tuple, list, set, frozenset))
        if rids is None or any(as_int(x) is None for x in rids):
            return hint(
                f"on {shown_as}: your function returned {shown_type(got)}: return the rids of "
                f"the requests that finish with this step, as ints"
            )
        rids = sorted(as_int(x) for x in rids)
        twice = sorted({r for r in rids if rids.count(r) > 1})
        two_ways = [w.rid for w in ref if w is not None and w.rid in want_finished
                    and w.out[-1:] == [eos] and len(w.out) == w.max_new_tokens]  # fmt: skip
        if twice:
            why = (  # a rid twice: a request ending two ways counted twice, or a list doubled
                "a request that ends two ways at once, EOS as its last allowed token, finishes once"
                if twice[0] in two_ways
                else "a request finishes once, so its rid is listed once (was the list added to "
                "itself, or a rid appended in two places?)"
            )
            return hint(
                f"on {shown_as}: your function returned request {twice[0]} more than once "
                f"({rids}): {why}. Return each finished rid once"
            )
        rows = sorted(i for i, r in enumerate(reqs) if r is not None and r.rid in want_finished)
        if rids != sorted(want_finished) and rids == rows:
            return hint(
                f"on {shown_as}: your function returned {rids}, the rows of the requests that "
                f"finish: return each finishing request's rid (req.rid), not its row, "
                f"expected {sorted(want_finished)}"
            )
        by_length = _length_slip(reqs, ref, rids, want_finished, eos)
        if by_length:
            return hint(
                f"on {shown_as}: your function returned finished rids {rids}, expected "
                f"{sorted(want_finished)}: {by_length}. A request finishes when its out holds "
                f"max_new_tokens ids, after appending this one (len(req.out) == "
                f"req.max_new_tokens)"
            )
        done_before = {
            w.rid for w in ref if w is not None and w.rid not in want_finished
            and (len(w.out) >= w.max_new_tokens or (eos is not None and w.out[-1:] == [eos]))
        }  # fmt: skip
        again = sorted(set(rids) - set(want_finished))
        if again and set(again) <= done_before:
            return hint(
                f"on {shown_as}: your function returned finished rids {rids}, expected "
                f"{sorted(want_finished)}: request {again[0]} had finished at an earlier step. "
                f"Its row ran once more, and that token is dropped. It is not finished again: "
                f"report a request only at the step it finishes"
            )
        if rids != sorted(want_finished) and eos is None:
            return hint(
                f"on {shown_as}: your function returned finished rids {rids}, expected "
                f"{sorted(want_finished)}: eos_id None means no EOS, so no request finishes by "
                f"EOS, only when its out holds max_new_tokens ids (token_id == eos_id is False for "
                f"every id): eos_id being None finishes nothing"
            )
        if rids != sorted(want_finished) and eos not in (0, EOS):  # eos_id 1000
            return hint(
                f"on {shown_as}: your function returned finished rids {rids}, expected "
                f"{sorted(want_finished)}: `is` compares objects, not values: 1000 here is an "
                f"int of its own, so compare with =="
            )
        if rids != sorted(want_finished):
            return hint(
                f"on {shown_as}: your function returned finished rids {rids}, expected "
                f"{sorted(want_finished)}: a request finishes when the id just appended is "
                f"eos_id (0 is an id too: compare with ==, never test eos_id's truth) or its "
                f"out reaches max_new_tokens, and one that had finished before is not finished "
                f"again"
            )
    return ok(
        "each late-read id goes to its request, and a finished request's extra token is dropped"
    )


# --- exercise 3: the noise key, independent of the row ------------------------------------------

NOISE_V = 16
WIDE_V = 4096  # one row's uniforms along a large vocabulary: do they look uniform?
WIDE_ROWS = 16
MANY_ROWS, MANY_V = 4096, 512  # 2M draws: a hash that can reach exactly 0 or 1 shows it
# Keys whose hash, composed as uniform_noise composes it, lands at an end of (0, 1) when its
# bits are turned into a float carelessly (found by search; a unit test checks them):
# at seed 12943, position 0, id 136 the top 23 bits are all 0, so bits * 2**-23 is 0;
# at seed 119692, position 0, id 110 the hash is 2**63 - 2**38 or more, so
# h.float() / 2.0**64 + 0.5 rounds to 1.0 in float32;
# at seed 13297, position 0, id 15 the top 24 bits are all 1, so (bits + 1) * 2**-23 is 1,
# and so is any mapping of 24 bits or more that rounds to float32 at the end.
ENDS_SEEDS, ENDS_V = (12943, 119692, 13297), 137


def _noise_problem(u, B, V=NOISE_V) -> str | None:
    if not isinstance(u, torch.Tensor):
        return f"returned {shown_type(u)}: return a float tensor (B, vocab_size)"
    if tuple(u.shape) != (B, V):
        columns = u.ndim == 2 and u.shape[0] == B
        why = ("vocab_size columns: take the width from vocab_size, not a number of your own"
               if columns else "one row of uniforms per request")  # fmt: skip
        return f"returned shape {tuple(u.shape)}, expected {(B, V)}: {why}"
    if not u.dtype.is_floating_point:
        return f"returned a {u.dtype} tensor: return uniforms in (0, 1), floats"
    if torch.finfo(u.dtype).eps > 2**-23:  # float16, bfloat16: fewer bits than float32
        return (
            f"returned a {u.dtype} tensor: it keeps fewer bits than the 23 of a uniform, so "
            f"(bits + 0.5) * 2**-23 rounds there, up to 1.0 for the largest. "
            f"Return float32 (or float64): no .half(), no .to(torch.bfloat16)"
        )
    if bool((u < 0).any()):
        return (
            "returned negative values, outside (0, 1): the hash is a signed int64, so its bits "
            "taken as they are can be negative (and >> keeps the sign). "
            "Mask the bits you keep to 23 non-negative ones, e.g. (h >> 41) & (2**23 - 1), then "
            "(bits + 0.5) * 2**-23"
        )
    if not bool(((u >= 0) & (u <= 1)).all()):  # NaN too
        return (
            "returned values outside (0, 1): uniforms in the open interval, never 0 or 1 "
            "(log(u) must be finite)"
        )
    zeros, ones = int((u == 0).sum()), int((u == 1).sum())
    if zeros:
        return (
            f"returned {zeros} of {u.numel()} values exactly 0: Gumbel's -log(-log(u)) is "
            f"-inf at u = 0, so that token is never drawn. bits * 2**-b is 0 when the bits "
            f"kept are all 0. Add one half first: (bits + 0.5) * 2**-23, as uniform_noise does"
        )
    grid = u.double().flatten() * 2.0**24
    if ones and bool((grid == grid.floor()).all()) and bool((grid.long() % 2 == 0).all()):
        return (
            f"returned {ones} of {u.numel()} values exactly 1: Gumbel's -log(-log(u)) is "
            f"+inf at u = 1, so that token is always drawn. (bits + 1) * 2**-23 is 1 when the "
            f"23 bits are all 1. Add one half, not one: (bits + 0.5) * 2**-23"
        )
    if ones:
        return (
            f"returned {ones} of {u.numel()} values exactly 1: Gumbel's -log(-log(u)) is "
            f"+inf at u = 1, so that token is always drawn. A float32 holds 24 significant "
            f"bits, so a value within 2**-25 of 1 rounds to 1.0: (bits + 0.5) * 2**-24 does, "
            f"and so does a float64 uniform turned to float32 at the end. Keep the top 23 "
            f"bits: (bits + 0.5) * 2**-23 is exact in float32 and never 1"
        )
    return None


def _lattice_problem(u) -> str | None:
    """Uniforms of the form (k + 0.5) * 2**-23, 23 bits, are exact in float32 and never 0 or
    1, as the exercise asks. Any other form of bits-to-float can land on 0 or round to 1 for
    some key, even if no draw here did: k * 2**-b holds 0, (k + 1) * 2**-b holds 1, and a
    division or a clamp lands off the grid, where float32 rounds. Read off the values: at
    scale 2**24 (float32) or 2**60 (float64) each must be an odd multiple of one power of
    two, 1 in float32 (23 bits) and at most 2**36 in float64 (23 bits or more)."""
    scale, most = (60, 2**36) if u.dtype == torch.float64 else (24, 1)
    x = u.double().flatten() * 2.0**scale
    form = "(bits + 0.5) * 2**-23 with 23 bits of the hash, the form the exercise asks for"
    if not bool((x == x.floor()).all()):
        return (
            f"returned uniforms off the grid of {form}. That form is exact in float32, never "
            f"0 and never 1. Another mapping, such as a division, a clamp or more bits than "
            f"float32 holds, can land on 0 or round to 1 for some key"
        )
    k = x.long()
    lowest = k & -k  # each value's lowest set bit
    if not bool((lowest == lowest[0]).all()):
        return (
            f"returned uniforms not all of the form (k + 0.5) * 2**-b. Use {form}. A form "
            f"like k * 2**-b or (k + 1) * 2**-b lands on 0 or 1 for some key, even if no draw "
            f"here did, and a clamp or a division leaves the grid"
        )
    if int(lowest[0]) > most:
        bits = 23 - (int(lowest[0]) // most).bit_length() + 1
        return (
            f"returned uniforms made from {bits} bits of the hash: only 2**{bits} values. Use "
            f"{form}: (h >> 41) & (2**23 - 1)"
        )
    return None


def _explain_noise(error: Exception) -> str | None:
    if isinstance(error, RuntimeError) and "must match the size of tensor" in str(error):
        return (
            "the hash of (seed, position), h, is one value per row, (B,), and the ids are "
            "(V,): use h[:, None] for a (B, V) grid"
        )
    if isinstance(error, OverflowError):
        return (
            "a tensor operation takes a Python int only where it fits an int64, and 2**64 "
            "does not (nor does 2**63). Keep 23 bits of the hash with a mask, "
            "(h >> 41) & (2**23 - 1), then (bits + 0.5) * 2**-23, a float in (0, 1)"
        )
    return None


def _noise(fn, args, shown_as, seconds=CALL_SECONDS):
    """fn(*args), a learner's noise key, or FAILED after a hint."""
    return call(fn, args, shown_as, seconds=seconds, explain=_explain_noise)


def _shift_problem(fn) -> str | None | object:
    """A key that adds the position (or the seed) to the vocab id shifts one position's
    noise into the next's: (seed, p + 1)'s noise at id i is (seed, p)'s at id i + 1."""
    seed, position = torch.tensor([11, 11]), torch.tensor([5, 6])
    shown_as = "seed 11 at positions 5 and 6"
    u = _noise(fn, (seed, position, torch.arange(2), WIDE_V), shown_as)
    if u is FAILED:
        return FAILED
    if isinstance(u, torch.Tensor) and u.shape == (2, WIDE_V):
        a, b = u[0], u[1]
        if torch.equal(a[1:], b[:-1]) or torch.equal(a[:-1], b[1:]):
            return (
                f"on {shown_as}: position 6's noise is position 5's shifted by one vocab id, so "
                f"a request's draws repeat from token to token. Don't add the position (or the "
                f"seed) to the id: hash (seed, position) first, then mix in the id"
            )
    return None


def _collision_problem(fn) -> str | None | object:
    """Keys that a careless mix of seed and position makes equal: (s, p + 1) and (s + 1, p),
    (s, p) and (p, s). A problem, None, or FAILED (hinted)."""
    seed, position = torch.tensor([11, 12, 9, 5]), torch.tensor([6, 5, 5, 9])
    shown_as = "seeds [11, 12, 9, 5] at positions [6, 5, 5, 9]"
    u = _noise(fn, (seed, position, torch.arange(4), NOISE_V), shown_as)
    if u is FAILED:
        return FAILED
    problem = _noise_problem(u, 4)
    if problem:
        return f"on {shown_as} your function {problem}"
    for a, b in ((0, 1), (2, 3)):
        swapped = seed[[a, b]].tolist() == position[[b, a]].tolist()
        if torch.equal(u[a], u[b]) and swapped:
            return (
                f"(seed {int(seed[a])}, position {int(position[a])}) and (seed "
                f"{int(seed[b])}, position {int(position[b])}) drew the same noise: the key "
                f"is symmetric, so (seed s, position p) and (seed p, position s) collide. "
                f"Hash the seed, then mix the position into that hash and hash again: "
                f"splitmix64(splitmix64(seed) ^ position), as uniform_noise does"
            )
        if torch.equal(u[a], u[b]):
            return (
                f"(seed {int(seed[a])}, position {int(position[a])}) and (seed "
                f"{int(seed[b])}, position {int(position[b])}) drew the same noise: seed and "
                f"position collide (seed + position, seed ^ position, ... make different "
                f"requests share draws). Hash the seed first, then mix in the position: "
                f"splitmix64(splitmix64(seed) ^ position), as uniform_noise does"
            )
    return None


REUSE_V = 512  # 64 neighbouring keys, 512 ids each: do two keys share a stretch of draws?


def _reuse_problem(fn) -> str | None | object:
    """Neighbouring keys (8 seeds × 8 positions) must not share draws. Independent 23-bit
    uniforms share about REUSE_V**2 / 2**23 (0.03) values between two rows; a key that lets
    one (seed, position) reach another's ids (seed + position * 64 + id, say) shares a
    stretch of them. A problem, None, or FAILED (hinted)."""
    seed = torch.arange(100, 108).repeat_interleave(8)
    position = torch.arange(20, 28).repeat(8)
    shown_as = "seeds 100-107 at positions 20-27 (64 requests)"
    u = _noise(fn, (seed, position, torch.arange(64), REUSE_V), shown_as)
    if u is FAILED:
        return FAILED
    problem = _noise_problem(u, 64, REUSE_V)
    if problem:
        return f"on {shown_as} your function {problem}"
    shares = torch.stack([torch.isin(u, u[a]).sum(1) for a in range(64)])  # draws in common
    shares.fill_diagonal_(0)
    worst = int(shares.argmax())
    a, b = divmod(worst, 64)
    shared = int(shares[a, b])
    if shared < REUSE_V // 8:
        return None
    return (
        f"on {shown_as}, (seed {int(seed[a])}, position {int(position[a])}) and (seed "
        f"{int(seed[b])}, position {int(position[b])}) share {shared} of their "
        f"{REUSE_V} draws: one key reaches the other's ids, so two tokens reuse the same "
        f"noise. Hash (seed, position) first, then mix in the id: "
        f"splitmix64(splitmix64(splitmix64(seed) ^ position) ^ id)"
    )


def _linear_key_problem(fn) -> str | None | object:
    """Seeds 100 and 101 at positions 0-1099: a key such as splitmix64(seed * 31 + position)
    gives (101, p) the noise of (100, p + 31). Any two keys that draw the same row are found.
    A problem, None, or FAILED (hinted)."""
    positions = torch.arange(1100)
    seed = torch.tensor([100, 101]).repeat_interleave(len(positions))
    position = positions.repeat(2)
    shown_as = "seeds 100 and 101 at positions 0-1099"
    u = _noise(fn, (seed, position, torch.arange(len(seed)), NOISE_V), shown_as)
    if u is FAILED:
        return FAILED
    if _noise_problem(u, len(seed)):
        return None  # the other checks name that
    first: dict[bytes, int] = {}
    for i, row in enumerate(u.numpy()):
        j = first.setdefault(row.tobytes(), i)
        if j != i:
            return (
                f"on {shown_as}, (seed {int(seed[j])}, position {int(position[j])}) and (seed "
                f"{int(seed[i])}, position {int(position[i])}) drew the same noise: a key "
                f"that adds a multiple of the seed to the position makes two requests share "
                f"draws. Hash the seed first, then mix in the position: "
                f"splitmix64(splitmix64(seed) ^ position)"
            )
    return None


def _draws(fn, rows: int, vocab: int, gen_seed: int) -> tuple:
    """fn on `rows` requests of random seeds and positions (drawn from gen_seed), each in its
    own row, over `vocab` ids: (uniforms, shown) if they are shaped and valued as uniforms,
    else (the problem, shown), or (FAILED, shown) after a hint."""
    g = torch.Generator().manual_seed(gen_seed)
    seed = torch.randint(0, 2**40, (rows,), generator=g)
    position = torch.randint(0, 1000, (rows,), generator=g)
    shown_as = f"{rows} requests, vocab_size {vocab}"
    # millions of draws: a busy laptop may take several seconds, so the limit is capture's
    u = _noise(fn, (seed, position, torch.arange(rows), vocab), shown_as, CAPTURE_SECONDS)
    if u is FAILED:
        return FAILED, shown_as
    problem = _noise_problem(u, rows, vocab)
    return (f"on {shown_as} your function {problem}" if problem else u), shown_as


def _spread_problem(fn) -> str | None | object:
    """Each row's uniforms along a wide vocabulary: all different, in no order, of mean 1/2
    and variance 1/12. A problem, None, or FAILED (hinted)."""
    u, shown_as = _draws(fn, WIDE_ROWS, WIDE_V, 9)
    if not isinstance(u, torch.Tensor):
        return u  # FAILED, or the problem
    u = u.double()
    levels = int(u.unique().numel())
    per_row = max(int(u[r].unique().numel()) for r in range(WIDE_ROWS))
    if levels < u.numel() // 2 and levels < 4 * per_row:  # the same few values in every row
        return (
            f"on {shown_as}, the {u.numel()} uniforms hold only {levels} distinct values, the "
            f"same few in every request: the hash was cut down to a few values (h % n, or a "
            f"few of its bits) before it became a float, so many ids draw the same noise. "
            f"Keep the hash's top 23 bits, (bits + 0.5) * 2**-23, as uniform_noise does"
        )
    for r in range(WIDE_ROWS):
        row = u[r]
        distinct = int(row.unique().numel())
        if distinct == 1:
            return (
                f"on {shown_as}, request {r}'s uniforms are one value ({float(row[0]):.4g}) "
                f"for every vocab id: Gumbel-max then adds the same noise to every logit and "
                f"always picks the argmax, which is greedy. Draw one uniform per vocab id: "
                f"mix the id in, then hash again, splitmix64(h ^ id), as uniform_noise does. "
                f"An id mixed in after the last hash changes only low bits, which the top 23 "
                f"bits never see"
            )
        if distinct < WIDE_V // 2:
            return (
                f"on {shown_as}, request {r}'s {WIDE_V} uniforms hold only {distinct} distinct "
                f"values: the vocab ids share a few draws. Each id needs its own uniform: "
                f"mix the id in, then hash again, splitmix64(h ^ id)"
            )
        rising = float((row[1:] > row[:-1]).double().mean())
        if not 0.4 < rising < 0.6:
            return (
                f"on {shown_as}, request {r}'s uniforms {'rise' if rising > 0.5 else 'fall'} "
                f"along the vocab ({rising:.0%} of neighbours in increasing order, about 50% "
                f"for independent draws): each id's noise follows its place in the vocab, so "
                f"the same ids always get the large noise. That comes of sorting the draws, or "
                f"of mixing the id in after the hash (h ^ id, h + (id << k)). Hash the id in "
                f"too: splitmix64(h ^ id)"
            )
        mean, var = float(row.mean()), float(row.var())
        if abs(mean - 0.5) > 0.02 or abs(var - 1 / 12) > 0.01:
            return (
                f"on {shown_as}, request {r}'s uniforms have mean {mean:.3f} and variance "
                f"{var:.4f}, expected about 0.5 and 1/12 = 0.0833: they are not uniform in "
                f"(0, 1). Take the hash's top bits to a float evenly, as uniform_noise does"
            )
    return None


TIED_ROWS, TIED_V = 256, 64  # random keys, a few ids each: is an id's noise tied to the key?


def _tied_problem(fn) -> str | None | object:
    """Across many random keys, an id's draw must change with the key, and two ids' draws
    must not move together. A key that multiplies the hash by the id draws splitmix64(0)
    for id 0 whatever the key; one that hashes the id apart and mixes it in after
    (h ^ splitmix64(id), then the top bits) ties two ids: the xor (or the difference) of
    their bits is the same for every key. Read on the top 23 bits of each uniform. A
    problem, None, or FAILED (hinted)."""
    u, shown_as = _draws(fn, TIED_ROWS, TIED_V, 11)
    if not isinstance(u, torch.Tensor):
        return u  # FAILED, or the problem
    same = (u == u[:1]).all(0)
    if bool(same.any()):
        i = int(same.nonzero()[0])
        how = ", not multiplied by it (h * 0 is 0, whatever the key)" if i == 0 else ""
        return (
            f"on {shown_as}, id {i}'s noise is the same for every request and position "
            f"({float(u[0, i]):.4g}): the id must be mixed into the key before the last hash "
            f"(h ^ id, then splitmix64){how}"
        )
    bits = (u.double() * 2.0**23).floor().long()  # the top 23 bits
    for j in range(1, TIED_V):
        for mixed, tie in (("xor", bits[:, j] ^ bits[:, 0]),
                           ("difference", (bits[:, j] - bits[:, 0]) % 2**23)):  # fmt: skip
            if tie.unique().numel() <= 3:  # an addition's carry moves it by one at most
                return (
                    f"on {shown_as}, the {mixed} of id 0's and id {j}'s bits is the same for "
                    f"every request: the id is hashed apart from the key and "
                    f"{'xored' if mixed == 'xor' else 'added'} in after, so two ids' noises "
                    f"are tied for every request. Hash the key and the id together: "
                    f"splitmix64(h ^ id)"
                )
    return None


def _open_interval_problem(fn) -> str | None | object:
    """The keys known to reach an end, then many draws: all strictly inside (0, 1), and of a
    form that never reaches an end (_lattice_problem). A problem, None, or FAILED (hinted)."""
    seed = torch.tensor(ENDS_SEEDS)
    shown_as = f"seeds {list(ENDS_SEEDS)} at position 0, vocab_size {ENDS_V}"
    u = _noise(fn, (seed, torch.zeros_like(seed), torch.arange(len(seed)), ENDS_V), shown_as)
    if u is FAILED:
        return FAILED
    problem = _noise_problem(u, len(seed), ENDS_V)
    if problem:
        return f"on {shown_as} your function {problem}"
    u, shown_as = _draws(fn, MANY_ROWS, MANY_V, 10)
    if not isinstance(u, torch.Tensor):
        return u
    problem = _lattice_problem(u)
    return f"on {shown_as} your function {problem}" if problem else None


@checker
def check_noise_key(fn) -> Verdict:
    """fn(seed (B,), position (B,), row (B,), vocab_size) → uniforms (B, vocab_size) in
    (0, 1): a request's noise for the token at `position`. It must depend on the request's
    seed and position alone, so that a request draws the same noise alone (row 0) or batched
    (any row), and be made of device ops (captured under the CPU graph simulator). Built from
    splitmix64: a function that calls generation.uniform_noise is refused."""
    seed = torch.tensor([11, 22, 33, 44])
    position = torch.tensor([5, 9, 5, 17])
    row = torch.arange(4)
    shown_as = "4 requests in rows 0-3"
    given = (seed.clone(), position.clone(), row.clone())
    with entered(uniform_noise) as ran:
        batched = _noise(fn, (*given, NOISE_V), shown_as)
    if batched is FAILED:
        return False
    changed = _changed(("seed", "position", "row"), given, (seed, position, row))
    if changed:
        why = _read_only("position + 1, not position.add_(1)")
        return hint(f"on {shown_as} your function changed its input {changed}: {why}")
    if ran[uniform_noise]:
        return hint(
            "your function calls generation.uniform_noise: this exercise is to build the key "
            "yourself, from splitmix64. Which of seed, position, row and vocab id go into the "
            "hash, and in which order, is the exercise"
        )
    problem = _noise_problem(batched, 4)
    if problem:
        return hint(f"on {shown_as} your function {problem}")
    for r in (2, 3):
        shown_r = f"request {r} alone (row 0)"
        one = (
            seed[r : r + 1].clone(),
            position[r : r + 1].clone(),
            torch.zeros(1, dtype=torch.long),
        )
        alone = _noise(fn, (*one, NOISE_V), shown_r)
        if alone is FAILED:
            return False
        problem = _noise_problem(alone, 1)
        if problem:
            return hint(f"on {shown_r} your function {problem}")
        if not torch.equal(alone[0], batched[r]):
            return hint(
                f"request {r} (seed {int(seed[r])}, position {int(position[r])}) drew "
                f"different noise alone in row 0 and batched in row {r}: the key must not "
                f"depend on the row, nor on a generator shared by the batch (torch.rand): "
                f"hash (seed, position, vocab id), as uniform_noise does"
            )
    again = _noise(fn, (seed.clone(), position.clone(), row.clone(), NOISE_V), shown_as)
    if again is FAILED:
        return False
    if _noise_problem(again, 4) or not torch.equal(again, batched):
        return hint(
            "called twice with the same seeds and positions your function drew different "
            "noise: a shared generator (torch.rand, a torch.Generator) moves on with each "
            "draw. Key the noise by (seed, position) only"
        )
    if torch.equal(batched[0], batched[2]):
        return hint(
            "requests 0 and 2 (seeds 11 and 33, both at position 5) drew the same noise: "
            "the key must depend on the seed. Hash it first, splitmix64(seed): a seed mixed "
            "in after the last hash changes only low bits, which the top 23 bits never see"
        )
    moved = _noise(fn, (seed.clone(), position + 1, row.clone(), NOISE_V), "the next positions")
    if moved is FAILED:
        return False
    if _noise_problem(moved, 4) or torch.equal(moved[0], batched[0]):
        return hint(
            "request 0 drew the same noise at positions 5 and 6: the key must depend on the "
            "position, or every token of a request reuses one draw. Mix the position in "
            "before a hash, splitmix64(splitmix64(seed) ^ position): one mixed in after the "
            "last hash changes only low bits, which the top 23 bits never see"
        )
    static = [seed.clone(), position.clone(), row.clone()]
    done = _captured(fn, (*static, NOISE_V), shown_as,
                     "the noise is drawn inside the decode step's graph: hash the seed and "
                     "position with tensor ops (no .item(), int() or .tolist())")  # fmt: skip
    if done is FAILED:
        return False
    graph, out = done
    static[1].copy_(position + 7)
    graph.replay()
    ref_again = _noise(fn, (seed.clone(), position + 7, row.clone(), NOISE_V), shown_as)
    if ref_again is FAILED:
        return False
    if not isinstance(out, torch.Tensor) or not torch.equal(out, ref_again):
        return hint(
            "captured at positions [5, 9, 5, 17] and replayed at new positions, the noise is "
            "the captured one: compute the key from the position tensor on the device"
        )
    for find in (_spread_problem, _tied_problem, _collision_problem, _shift_problem,
                 _reuse_problem, _linear_key_problem, _open_interval_problem):  # fmt: skip
        problem = find(fn)
        if problem is FAILED:
            return False
        if problem:
            return hint(problem)
    away = off_device(fn, (seed, position, row, NOISE_V), "seed.device")
    if away:
        return hint(f"on {shown_as}, with every tensor on the device, your function {away}")
    return ok("the noise is keyed by (seed, position) alone: the same draw alone or batched")
