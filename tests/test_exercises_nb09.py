"""tinyllm.course.exercises.nb09: the checkers of notebook 09's exercises (the step's sampling
on the device, a late-read move's ids handed to their requests, the noise key).

A checker accepts the right answer and answers every wrong one with one [HINT] line:
never a traceback, never a false [OK]. Junk, stubs, crashes and hangs: tests/test_exercises.py.
"""

import copy
import sys

import numpy as np
import pytest
import torch
from conftest import assert_hint, assert_ok

from tinyllm.course.exercises import check_hand_out, check_noise_key, check_step_sampling, nb09
from tinyllm.generation import sample, splitmix64, uniform_noise
from tinyllm.serve import PagedEngine

# --- exercise 1: the step's sampling, on the device -------------------------------------------


def my_step_sampling(logits, temperature, seed, position):
    u = uniform_noise(seed, position, logits.shape[-1])
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    scores = logits / t - torch.log(-torch.log(u))
    return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))


def sampling_times_t(logits, temperature, seed, position):
    u = uniform_noise(seed, position, logits.shape[-1])
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    scores = logits * t - torch.log(-torch.log(u))  # times the temperature, not divided by it
    return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))


def sampling_with_an_if(logits, temperature, seed, position):
    out = []
    for b in range(len(logits)):
        if temperature[b] > 0:  # a Python if on a tensor: bool() reads it on the host
            out.append(my_step_sampling(logits[b : b + 1], temperature[b : b + 1],
                                        seed[b : b + 1], position[b : b + 1]))  # fmt: skip
        else:
            out.append(logits[b : b + 1].argmax(-1))
    return torch.cat(out)


def sampling_with_item(logits, temperature, seed, position):
    t = temperature.max().item()  # the host reads a value
    return my_step_sampling(logits, temperature, seed, position) if t > 0 else logits.argmax(-1)


def sampling_with_tolist(logits, temperature, seed, position):
    greedy = [t == 0 for t in temperature.tolist()]
    out = my_step_sampling(logits, temperature, seed, position)
    return torch.where(torch.tensor(greedy), logits.argmax(-1), out)


def sampling_with_a_mask(logits, temperature, seed, position):
    out = logits.argmax(-1)
    hot = temperature > 0
    out[hot] = my_step_sampling(logits, temperature, seed, position)[hot]  # a data-dependent shape
    return out


def divides_in_place(logits, temperature, seed, position):
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    u = uniform_noise(seed, position, logits.shape[-1])
    scores = logits.div_(t) - torch.log(-torch.log(u))  # the decoder's logits, divided in place
    return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))


def _gumbel_of(s, p, vocab_size):
    return -torch.log(-torch.log(uniform_noise(s, p, vocab_size)))


def sampling_with_where_swapped(logits, temperature, seed, position):
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    g = -torch.log(-torch.log(uniform_noise(seed, position, logits.shape[-1])))
    return torch.where(temperature == 0, (logits / t + g).argmax(-1), logits.argmax(-1))


def argmax_over_the_rows(logits, temperature, seed, position):
    """argmax(0) for argmax(-1): torch.where gets (V,) ids where it wants (B,)."""
    t = torch.where(temperature > 0, temperature, 1.0)
    scores = logits / t[:, None] + _gumbel_of(seed, position, logits.shape[-1])
    return torch.where(temperature > 0, scores.argmax(0), logits.argmax(0))


def argmax_over_the_rows_cut_to_b(logits, temperature, seed, position):
    """argmax(0), cut to B ids so that torch.where runs: row numbers, not vocab ids."""
    B = logits.shape[0]
    scores = logits / temperature[:, None] + _gumbel_of(seed, position, logits.shape[-1])
    return torch.where(temperature > 0, scores.argmax(0)[:B], logits.argmax(0)[:B])


def sampling_with_the_notebooks_v(logits, temperature, seed, position):
    """The notebook's global V = model.cfg.vocab_size (258), not the logits' 64."""
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    scores = logits / t + _gumbel_of(seed, position, 258)
    return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))


def sampling_with_torch_rand(logits, temperature, seed, position):
    """Gumbel-max done right, on noise of torch.rand: not the request's (seed, position)."""
    t = torch.where(temperature > 0, temperature, 1.0)[:, None]
    scores = logits / t - torch.log(-torch.log(torch.rand(logits.shape)))
    return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))


def test_the_reference_is_the_engines_sampler():
    logits, temperature, seed, position = nb09._sampling_case(0)
    want = sample(logits, temperature, torch.zeros_like(seed), seed, position)
    assert torch.equal(my_step_sampling(logits, temperature, seed, position), want)
    assert not torch.equal(want, logits.argmax(-1))  # the sampled rows are not all greedy


def test_step_sampling_right(capsys):
    assert_ok(check_step_sampling, my_step_sampling, capsys)
    assert_ok(check_step_sampling, lambda *a: my_step_sampling(*a).int(), capsys)


@pytest.mark.parametrize(
    "answer, needles",
    [
        (sampling_with_an_if, ("captured on case 2", "a Python `if` on a tensor")),
        (sampling_with_item, ("captured on case 2", ".item()")),
        (sampling_with_tolist, ("captured on case 2", "torch.where")),
        (lambda x, t, s, p: x.argmax(-1), ("row 1 (temperature 0.3)", "Gumbel")),
        (sampling_times_t, ("case 0", "temperature 3", "not multiply")),
        (
            lambda x, t, s, p: (x / t[:, None].clamp(min=1e-3) + torch.log(
                uniform_noise(s, p, x.shape[-1]))).argmax(-1),
            ("-log(-log(u))",),
        ),
        (
            lambda x, t, s, p: (x / t[:, None].clamp(min=1e-3) + torch.rand(x.shape)).argmax(-1),
            ("uniform_noise(seed, position, V)",),
        ),
        (lambda x, t, s, p: my_step_sampling(x, t, s, p).float(), ("float32 ids",)),
        (lambda x, t, s, p: my_step_sampling(x, t, s, p)[:2], ("shape (2,)",)),
        (lambda x, t, s, p: my_step_sampling(x, t, s, p).tolist(), ("a list",)),
        (lambda x, t, s, p: sample(x, t, torch.zeros_like(s), s, p),
         ("the package's own sampler", "write it")),
        (sampling_with_a_mask,
         ("captured on case 2 (temperatures", "output shape depends on the data", "torch.where")),
        (lambda x, t, s, p: (my_step_sampling(x, t, s, p), t.zero_())[0],
         ("changed its input temperature", "every later step")),
        (lambda x, t, s, p: (my_step_sampling(x, t, s, p), s.add_(1))[0],
         ("changed its input seed",)),
        (divides_in_place, ("changed its input logits",)),
        (lambda x, t, s, p: (x / t.clamp(min=0.2)[:, None] - torch.log(
            -torch.log(uniform_noise(s, p, x.shape[-1])))).argmax(-1),
         ("temperature 0", "no noise", "torch.where")),
        (lambda x, t, s, p: (x / t[:, None] - torch.log(
            -torch.log(uniform_noise(s, p, x.shape[-1])))).argmax(-1),
         ("temperature 0", "divided by its temperature of 0", "torch.where")),
        (lambda x, t, s, p: (x / t.clamp(min=1e-6)[:, None] - torch.log(
            -torch.log(uniform_noise(s, p, x.shape[-1])))).argmax(-1),
         ("case 3", "ties with the best logit", "torch.where")),
        (lambda x, t, s, p: torch.where(t > 0, (x / t - torch.log(-torch.log(
            uniform_noise(s, p, x.shape[-1])))).argmax(-1), x.argmax(-1)),
         ("RuntimeError", "temperature[:, None]")),
        (lambda x, t, s, p: torch.where(t > 0, (x / torch.where(t > 0, t, 1.0)[:, None] - torch.log(
            -torch.log(uniform_noise(s, p, x.shape[0])))).argmax(-1), x.argmax(-1)),
         ("RuntimeError", "logits.shape[-1] = 64", "You passed 8", "is the batch")),
        (sampling_with_where_swapped, ("branches of torch.where are swapped",)),
        (argmax_over_the_rows,
         ("RuntimeError", "argmax over the vocabulary, dim=-1",
          "argmax(0) takes it over the rows")),
        (argmax_over_the_rows_cut_to_b,
         ("row 0 (temperature 0)", "a row number", "argmax over the vocabulary, dim=-1",
          "argmax(0) takes it over the rows")),
        (sampling_with_the_notebooks_v,
         ("RuntimeError", "You passed 258", "take V from the logits, logits.shape[-1]")),
        (sampling_with_torch_rand,
         ("uniform_noise(seed, position, V) was never called", "not the request's")),
    ],
    ids=["if", "item", "tolist", "greedy only", "logits * t", "log(u) for Gumbel",
         "torch.rand", "float", "shape", "list", "the package's own sample", "a boolean mask",
         "zeroes temperature", "bumps the seed", "divides the logits in place",
         "a clamped temperature, noise on greedy rows", "divides by a temperature of 0",
         "a temperature clamped to 1e-6",
         "no broadcast", "noise of shape (B, B)", "where's branches swapped", "argmax(0)",
         "argmax(0)[:B]",
         "the notebook's V", "noise of torch.rand"],
)  # fmt: skip
def test_step_sampling_wrong(answer, needles, capsys):
    out = assert_hint(check_step_sampling, answer, capsys, *needles)
    if "captured" not in needles[0]:  # a formula's mistake is not blamed on a host read
        assert "host" not in out
    assert MISBLAMED.get(answer, "\0") not in out, out


MISBLAMED = {  # what the old hints blamed for these mistakes
    argmax_over_the_rows: "temperature[:, None]",
    argmax_over_the_rows_cut_to_b: "greedy row",
    sampling_with_the_notebooks_v: "is the batch",
}


def _sampled_with(formula):
    def step_sampling(x, t, s, p):
        g = -torch.log(-torch.log(uniform_noise(s, p, x.shape[-1])))
        tt = torch.where(t > 0, t, 1.0)[:, None]
        return torch.where(t > 0, formula(x, tt, s, p, g).argmax(-1), x.argmax(-1))

    return step_sampling


@pytest.mark.parametrize(
    "formula, needle",
    [
        (lambda x, t, s, p, g: x / t - g, "Here: the Gumbel noise is added"),
        (lambda x, t, s, p, g: x / t - torch.log(-torch.log(uniform_noise(s, p + 1, x.shape[-1]))),
         "not position + 1"),
        (lambda x, t, s, p, g: x / t - torch.log(-torch.log(uniform_noise(s, p - 1, x.shape[-1]))),
         "not position - 1"),
        (lambda x, t, s, p, g: x / t + uniform_noise(s, p.float(), x.shape[-1]),
         "int64 tensors, not floats"),
        (lambda x, t, s, p, g: x / t + uniform_noise(s.float(), p, x.shape[-1]),
         "int64 tensors, not floats"),
        (lambda x, t, s, p, g: x / t - torch.log(-torch.log(uniform_noise(p, s, x.shape[-1]))),
         "(seed, position, vocab_size), in that order"),
        (lambda x, t, s, p, g: (x + g) / t, "as if every temperature were 1"),
        (lambda x, t, s, p, g: x / t - torch.log(-torch.log(
            uniform_noise(s, torch.arange(len(s), device=s.device), x.shape[-1]))),
         "Here: the noise is keyed by the row"),
        (lambda x, t, s, p, g: x / t - torch.log(uniform_noise(s, p, x.shape[-1])),
         "Here: the noise is -log(u)"),
        (lambda x, t, s, p, g: x / t + uniform_noise(s, p, x.shape[-1]),
         "Here: the uniforms u themselves were added"),
    ],
    ids=["noise subtracted", "position + 1", "position - 1", "a float position", "a float seed",
         "seed and position swapped", "noise divided too",
         "the row's noise", "one log", "u for g"],
)  # fmt: skip
def test_step_sampling_slips_are_named(formula, needle, capsys):
    assert_hint(check_step_sampling, _sampled_with(formula), capsys, needle)


def test_step_sampling_that_keeps_low_temperatures_greedy_gets_a_hint(capsys):
    def threshold(x, t, s, p):
        return torch.where(t >= 1, my_step_sampling(x, t, s, p), x.argmax(-1))

    assert_hint(check_step_sampling, threshold, capsys, "a greedy row's choice", "above 0")


def test_the_eager_cases_spread_the_temperatures_wide():
    cases = [nb09._sampling_case(s)[1].tolist() for s in nb09.EAGER_CASES]
    temperatures = {round(t, 6) for case in cases for t in case}
    assert {0.0, 0.3, 1.0, 3.0} <= temperatures


def test_a_formula_wrong_only_on_the_replay_cases_gets_the_formula_hint(monkeypatch, capsys):
    """Right on the eager cases, wrong on a replayed one: the hint is the formula's, not a
    host read's (the function is run eagerly on the replayed case before capture is blamed)."""
    replayed = nb09._sampling_case(nb09.REPLAY_CASES[0])[0]

    def wrong_on_a_replay_case(logits, temperature, seed, position):
        ids = my_step_sampling(logits, temperature, seed, position)
        on_it = (logits == replayed).all()  # a tensor, no host read: captures and replays
        return torch.where(on_it & (temperature > 0), ids + 1, ids)

    out = assert_hint(check_step_sampling, wrong_on_a_replay_case, capsys, "case 4", "Gumbel")
    assert "host" not in out


def test_step_sampling_that_exits_gets_a_hint(capsys):
    def exits(*args):
        raise SystemExit(0)

    assert_hint(check_step_sampling, exits, capsys, "SystemExit")


def test_step_sampling_with_a_vocabulary_of_its_own_gets_a_hint(capsys):
    """Every other case has nb09.V ids: a V typed in passes them, and a case of the model's
    258 ids tells it, whether it raises or pads the noise to the logits' width."""
    V = nb09.V

    def typed_v(logits, temperature, seed, position, pad=False):
        u = uniform_noise(seed, position, V)
        if pad:
            u = torch.nn.functional.pad(u, (0, logits.shape[-1] - V), value=0.5)
        t = torch.where(temperature > 0, temperature, 1.0)[:, None]
        scores = logits / t - torch.log(-torch.log(u))
        return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))

    needles = ("258", "logits.shape[-1]")
    assert_hint(check_step_sampling, typed_v, capsys, *needles, "You passed 64")
    assert_hint(check_step_sampling, lambda *a: typed_v(*a, pad=True), capsys, *needles)


# --- exercise 2: the late-read ids handed to their requests -------------------------------------


def my_hand_out(reqs, ids, eos_id, drop=True, eos_seen=True, early=False, finished=True):
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        done = len(req.out) == req.max_new_tokens or (
            eos_seen and bool(req.out) and req.out[-1] == eos_id
        )
        if early:  # a request one token short taken for finished: a real token dropped
            done = len(req.out) + 1 >= req.max_new_tokens
        if done and drop:
            continue
        req.out.append(token_id)
        if finished and (token_id == eos_id or len(req.out) == req.max_new_tokens):
            out.append(req.rid)
    return out


def test_the_engine_drops_one_extra_token_per_request(toy_model):
    """The schedule the checker's rule follows: a request's first id comes from its
    admission, and it runs one decode step per token after it plus one more, whose token
    is dropped: the engine's rows over all steps equal the tokens it returns."""
    engine = PagedEngine(toy_model, 3, max_len=64, use_graph=False, eos_id=5)
    g = torch.Generator().manual_seed(0)
    news = (3, 6, 2, 5, 4)
    rids = [engine.submit(torch.randint(0, 200, (4,), generator=g).tolist(), n) for n in news]
    done = engine.run()
    steps = sum(s["n_active"] for s in engine.stats)
    produced = sum(len(v) for v in done.values())
    assert steps == produced  # each request: its first id at admission, one extra step
    assert all(len(done[r]) <= n for r, n in zip(rids, news))


def test_hand_out_right(capsys):
    assert_ok(check_hand_out, my_hand_out, capsys)
    assert_ok(check_hand_out, lambda *a: tuple(my_hand_out(*a)), capsys)


@pytest.mark.parametrize(
    "changed, needles",
    [
        ({"drop": False}, ("finished at max_new_tokens 4", "extra token must be dropped")),
        ({"eos_seen": False}, ("emitted EOS (3) in the step before", "extra token")),
        ({"early": True}, ("request 0 reaches max_new_tokens now", "keep it")),
        ({"finished": False}, ("finished rids []", "expected [0, 1]")),
    ],
    ids=["extra token kept", "EOS of the step before missed", "real token dropped",
         "no finished rids"],
)  # fmt: skip
def test_hand_out_wrong(changed, needles, capsys):
    assert_hint(check_hand_out, lambda *a: my_hand_out(*a, **changed), capsys, *needles)


def repeat_dropped(reqs, ids, eos_id):
    """Takes "read one step late" for "the same id read twice": drops an id equal to the last."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None or len(req.out) == req.max_new_tokens or req.out[-1:] == [eos_id]:
            continue
        if req.out and req.out[-1] == token_id:
            continue
        req.out.append(token_id)
        if token_id == eos_id or len(req.out) == req.max_new_tokens:
            out.append(req.rid)
    return out


def test_hand_out_repeated_id_dropped(capsys):
    assert_hint(check_hand_out, repeat_dropped, capsys, "draws 8 twice in a row",
                "expected [7, 8, 8]", "a repeated id is a new token")  # fmt: skip


def inverted_done_test(reqs, ids, eos_id):
    """Appends only to the requests that are already done: the done test inverted."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        if not (len(req.out) >= req.max_new_tokens or (req.out and req.out[-1] == eos_id)):
            continue
        req.out.append(token_id)
    return out


def test_hand_out_inverted_done_test(capsys):
    out = assert_hint(check_hand_out, inverted_done_test, capsys,
                      "running requests got no token while done ones did", "inverted")  # fmt: skip
    assert "a copy is lost" not in out


def finish_test_after(reqs, ids, eos_id, finishes):
    """my_hand_out with a finish test of its own on the length: finishes(req), tested after
    the append (or before it, where finishes is marked so)."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        if len(req.out) == req.max_new_tokens or (req.out and req.out[-1] == eos_id):
            continue
        long_enough = finishes(req) if getattr(finishes, "before", False) else None
        req.out.append(token_id)
        if long_enough is None:
            long_enough = finishes(req)
        if token_id == eos_id or long_enough:
            out.append(req.rid)
    return out


def before_the_append(finishes):
    finishes.before = True
    return finishes


@pytest.mark.parametrize(
    "finishes, needles",
    [
        (lambda req: len(req.out) > req.max_new_tokens,
         ("finished rids [1], expected [0, 1]", "request 0's out now holds 4 ids",
          "its out holds max_new_tokens ids, after appending this one")),
        (before_the_append(lambda req: len(req.out) >= req.max_new_tokens),
         ("finished rids [1], expected [0, 1]",
          "its out holds max_new_tokens ids, after appending this one")),
        (lambda req: len(req.out) >= req.max_new_tokens - 1,
         ("finished rids [1], expected []", "one short of its max_new_tokens",
          "its out holds max_new_tokens ids, after appending this one")),
    ],
    ids=["len(out) > max_new_tokens", ">= before the append", "one early"],
)  # fmt: skip
def test_hand_out_finish_test_off_by_one_wrong(finishes, needles, capsys):
    out = assert_hint(check_hand_out, lambda *a: finish_test_after(*a, finishes), capsys,
                      *needles)  # fmt: skip
    assert "eos_id's truth" not in out  # EOS is not the mistake here


@pytest.mark.parametrize("appends", ["the whole step's ids", "its id twice"])
def test_hand_out_that_appends_more_than_one_id_a_row_is_told_so(appends, capsys):
    def more(reqs, ids, eos_id):
        done = []
        for req, token_id in zip(reqs, ids):
            if req is None or req.out[-1:] == [eos_id] or len(req.out) >= req.max_new_tokens:
                continue
            req.out += ids if appends == "the whole step's ids" else [token_id, token_id]
            if token_id == eos_id or len(req.out) >= req.max_new_tokens:
                done.append(req.rid)
        return done

    out = assert_hint(check_hand_out, more, capsys, "ids this step. Each row takes exactly one")
    assert "had finished in the step before" not in out


def test_hand_out_that_reads_an_empty_out_gets_a_hint(capsys):
    def last_of_empty(reqs, ids, eos_id):
        done = []
        for req, token_id in zip(reqs, ids):
            if req is None or req.out[-1] == eos_id or len(req.out) == req.max_new_tokens:
                continue
            req.out.append(token_id)
            if token_id == eos_id or len(req.out) == req.max_new_tokens:
                done.append(req.rid)
        return done

    assert_hint(check_hand_out, last_of_empty, capsys, "IndexError", "out is still empty")


def test_hand_out_that_crashes_on_a_pad_row_gets_a_hint(capsys):
    def no_pad_rows(reqs, ids, eos_id):
        for req, token_id in zip(reqs, ids):
            req.out.append(token_id)
        return []

    assert_hint(check_hand_out, no_pad_rows, capsys, "raised AttributeError", "padded row",
                "skip it")  # fmt: skip


def test_hand_out_that_skips_pad_rows_in_reqs_alone_gets_a_hint(capsys):
    def misaligned(reqs, ids, eos_id):
        return my_hand_out([r for r in reqs if r is not None], ids, eos_id)

    assert_hint(check_hand_out, misaligned, capsys, "got ids[1]", "skipped in reqs but not in ids")


def test_hand_out_that_pops_the_ids_gets_a_hint(capsys):
    def pops(reqs, ids, eos_id):
        return my_hand_out(reqs, [ids.pop(0) for _ in range(len(ids))], eos_id)

    assert_hint(check_hand_out, pops, capsys, "changed its input ids", "never pop")


def test_hand_out_with_ids_and_reqs_swapped_gets_a_hint(capsys):
    assert_hint(check_hand_out, lambda reqs, ids, e: my_hand_out(ids, reqs, e), capsys,
                "AttributeError", "zip(reqs, ids)")  # fmt: skip


def test_hand_out_returning_a_rid_twice_gets_a_hint(capsys):
    def twice(reqs, ids, eos_id):
        finished = my_hand_out(reqs, ids, eos_id)
        both = [
            r.rid for r in reqs if r and r.out[-1:] == [eos_id] and len(r.out) == r.max_new_tokens
        ]
        return finished + [rid for rid in both if rid in finished]

    assert_hint(check_hand_out, twice, capsys, "more than once", "finishes once")


def test_hand_out_working_on_copies_gets_a_hint(capsys):
    def copies(reqs, ids, eos_id):
        return my_hand_out([copy.deepcopy(r) for r in reqs], ids, eos_id)

    assert_hint(check_hand_out, copies, capsys, "no request's out changed", "req.out itself")


def test_hand_out_that_changes_the_list_of_requests_gets_a_hint(capsys):
    def drops_pads(reqs, ids, eos_id):
        finished = my_hand_out(reqs, ids, eos_id)
        while None in reqs:
            reqs.remove(None)
        return finished

    assert_hint(check_hand_out, drops_pads, capsys, "changed the list reqs", "never the list")


def test_hand_out_returning_junk_rids_gets_a_hint(capsys):
    assert_hint(
        check_hand_out,
        lambda *a: (my_hand_out(*a), "x")[1],
        capsys,
        "rids of the requests",
        "as ints",
    )


def test_a_case_has_a_finishing_request_whose_rid_is_not_its_row():
    def rows_differ(reqs, ids):
        finished = nb09._reference_hand_out(reqs, ids, nb09.EOS)
        rows = [i for i, r in enumerate(reqs) if r is not None and r.rid in finished]
        return sorted(rows) != sorted(finished)

    assert any(rows_differ(reqs, ids) for reqs, ids, _ in nb09._requests())


def test_hand_out_returning_rows_for_rids_gets_a_hint(capsys):
    def rows(reqs, ids, eos_id):
        finished = set(my_hand_out(reqs, ids, eos_id))
        return [i for i, r in enumerate(reqs) if r is not None and r.rid in finished]

    out = assert_hint(check_hand_out, rows, capsys, "req.rid", "not its row", "expected [0]")
    assert "eos_id" not in out


def test_hand_out_testing_eos_ids_truth_gets_a_hint(capsys):
    def truthy(reqs, ids, eos_id):
        finished = []
        for req, token_id in zip(reqs, ids):
            if req is None or len(req.out) == req.max_new_tokens:
                continue
            if eos_id and req.out and req.out[-1] == eos_id:
                continue
            req.out.append(token_id)
            if (eos_id and token_id == eos_id) or len(req.out) == req.max_new_tokens:
                finished.append(req.rid)
        return finished

    assert_hint(check_hand_out, truthy, capsys, "eos_id 0", "compare with ==",
                "never test eos_id's truth")  # fmt: skip


def test_hand_out_taking_the_next_rows_id_gets_a_hint(capsys):
    def next_row(reqs, ids, eos_id):
        return my_hand_out(reqs, list(ids[1:]) + list(ids[:1]), eos_id)  # row i takes ids[i + 1]

    out = assert_hint(check_hand_out, next_row, capsys, "row i's own id")
    assert "as an int" not in out


def test_hand_out_returning_a_generator_expression_gets_a_hint(capsys):
    out = assert_hint(check_hand_out, lambda *a: (rid for rid in my_hand_out(*a)), capsys,
                      "returned a generator", "Return them as a list")  # fmt: skip
    assert "never ran" not in out


def test_hand_out_that_takes_no_eos_for_eos_0_gets_a_hint(capsys):
    """eos_id or 0: with no EOS (None), an id 0 ends a request."""
    assert_hint(check_hand_out, lambda reqs, ids, eos_id: my_hand_out(reqs, ids, eos_id or 0),
                capsys, "eos_id None", "draws id 0", "no request finishes by EOS")  # fmt: skip


def test_hand_out_that_extends_out_with_an_id_gets_a_hint(capsys):
    def extends(reqs, ids, eos_id):
        for req, token_id in zip(reqs, ids):
            if req is not None:
                req.out.extend(token_id)  # an id is one int: TypeError, not iterable
        return []

    assert_hint(check_hand_out, extends, capsys, "raised TypeError", "one int",
                "req.out.append(token_id)")  # fmt: skip


def test_hand_out_as_a_generator_gets_a_hint(capsys):
    def generator(reqs, ids, eos_id):
        yield from my_hand_out(reqs, ids, eos_id)

    assert_hint(check_hand_out, generator, capsys, "generator", "return the finished rids")


def test_hand_out_taking_ids_by_rid_gets_a_hint(capsys):
    """ids[req.rid] for ids[i]: right while rows are rids, wrong once compaction moved them."""

    def by_rid(reqs, ids, eos_id):
        return my_hand_out(reqs, [ids[r.rid] if r else 0 for r in reqs], eos_id)

    assert_hint(check_hand_out, by_rid, capsys, "after compaction", "got ids[1]", "ids[i]")


@pytest.mark.parametrize("convert", [torch.tensor, np.array], ids=["0-d tensors", "numpy"])
def test_hand_out_appending_anything_but_ints_gets_a_hint(convert, capsys):
    def not_ints(reqs, ids, eos_id):
        return my_hand_out(reqs, list(convert(ids)), eos_id)

    assert_hint(check_hand_out, not_ints, capsys, "append Python ints", "ids.tolist()")


def test_hand_out_comparing_ids_with_is_gets_a_hint(capsys):
    """`token_id is eos_id` holds for Python's cached small ints only: an eos of 1000 tells it."""

    def by_identity(reqs, ids, eos_id):
        finished = []
        for req, token_id in zip(reqs, ids):
            if (
                req is None
                or len(req.out) == req.max_new_tokens
                or (req.out and req.out[-1] is eos_id)
            ):
                continue
            req.out.append(token_id)
            if token_id is eos_id or len(req.out) == req.max_new_tokens:
                finished.append(req.rid)
        return finished

    out = assert_hint(check_hand_out, by_identity, capsys, "eos_id 1000",
                      "`is` compares objects", "compare with ==")  # fmt: skip
    assert "0 is an id too" not in out  # the truth test is not the mistake here


def test_hand_out_that_exits_gets_a_hint(capsys):
    assert_hint(check_hand_out, lambda *a: sys.exit("done"), capsys, "SystemExit")


def eos_finishes(reqs, ids, eos_id, finishes=lambda token_id, eos_id: token_id == eos_id, stop=()):
    """A hand-out whose EOS test is finishes(token_id, eos_id); stop: where `continue` became
    `break` ("done": after a finished request, "pad": at a None row)."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            if "pad" in stop:
                break
            continue
        if len(req.out) >= req.max_new_tokens or (req.out and req.out[-1] == eos_id):
            if "done" in stop:
                break
            continue
        req.out.append(token_id)
        if finishes(token_id, eos_id) or len(req.out) == req.max_new_tokens:
            out.append(req.rid)
    return out


@pytest.mark.parametrize(
    "finishes, needles",
    [
        (lambda token_id, eos_id: token_id == int(eos_id),
         ("eos_id None", "raised TypeError", "int(")),
        (lambda token_id, eos_id: token_id == eos_id or eos_id is None,
         ("eos_id None", "finished rids [0, 1], expected [0]", "no EOS")),
    ],
    ids=["int(eos_id)", "eos_id is None finishes"],
)  # fmt: skip
def test_hand_out_without_an_eos_gets_a_hint(finishes, needles, capsys):
    """The engine's default eos_id is None: no request finishes by EOS."""
    assert_hint(check_hand_out, lambda *a: eos_finishes(*a, finishes), capsys, *needles)


@pytest.mark.parametrize("stop", ["done", "pad"])
def test_hand_out_that_breaks_instead_of_continuing_gets_a_hint(stop, capsys):
    out = assert_hint(check_hand_out, lambda *a: eos_finishes(*a, stop=(stop,)), capsys,
                      "the loop stopped early", "use continue")  # fmt: skip
    assert "req.out itself" not in out and "keep it" not in out


# --- exercise 3: the noise key ----------------------------------------------------------------


def my_uniform(seed, position, vocab_size):
    """uniform_noise written from splitmix64, as the exercise asks and the solution does."""
    ids = torch.arange(vocab_size, device=seed.device)
    h = splitmix64(splitmix64(seed) ^ position)[:, None]
    bits = (splitmix64(h ^ ids) >> 41) & (2**23 - 1)
    return (bits.float() + 0.5) * 2.0**-23


def my_noise_key(seed, position, row, vocab_size):
    return my_uniform(seed, position, vocab_size)


def my_hash(seed, position, vocab_size):
    """The 64-bit hash my_uniform takes its top 23 bits from: (B, vocab_size) int64."""
    h = splitmix64(splitmix64(seed) ^ position)[:, None]
    return splitmix64(h ^ torch.arange(vocab_size, device=seed.device))


def test_noise_key_divides_by_2_to_the_64(capsys):
    """2**64 overflows a tensor op's int64: the hint says how to keep 23 bits instead."""
    answer = lambda s, p, r, v: my_hash(s, p, v).float() / 2**64 + 0.5  # noqa: E731
    assert_hint(check_noise_key, answer, capsys, "OverflowError", "2**64 does not",
                "mask", "(bits + 0.5) * 2**-23")  # fmt: skip


def top_bits_times_ulp(seed, position, row, vocab_size):
    """The top 23 bits times 2**-23, without the half: exactly 0 where they are all 0."""
    return ((my_hash(seed, position, vocab_size) >> 41) & (2**23 - 1)).float() * 2.0**-23


def hash_over_two_to_the_64(seed, position, row, vocab_size):
    """The signed hash over 2**64, plus one half: 1.0 in float32 where it is near 2**63."""
    return my_hash(seed, position, vocab_size).float() / 2.0**64 + 0.5


def other_hash(seed, position, vocab_size):
    """The key in another order: the position hashed first, then the seed, then the id."""
    h = splitmix64(splitmix64(position) ^ seed)[:, None]
    return splitmix64(h ^ torch.arange(vocab_size, device=seed.device))


def id_multiplied(seed, position, row, vocab_size):
    """The id multiplied into the key: id 0 hashes splitmix64(0) whatever the key."""
    h = splitmix64(splitmix64(seed) ^ position)[:, None]
    bits = (splitmix64(h * torch.arange(vocab_size)) >> 41) & (2**23 - 1)
    return (bits.float() + 0.5) * 2.0**-23


def id_hashed_apart(seed, position, row, vocab_size):
    """The id hashed on its own and xored in after: two ids' bits xor to a constant."""
    h = splitmix64(splitmix64(seed) ^ position)[:, None]
    bits = ((h ^ splitmix64(torch.arange(vocab_size))) >> 41) & (2**23 - 1)
    return (bits.float() + 0.5) * 2.0**-23


def bumps_position_in_place(seed, position, row, vocab_size):
    position += 1
    return my_noise_key(seed, position, row, vocab_size)


def added_position(seed, position, row, vocab_size):
    h = splitmix64(splitmix64(seed)[:, None] ^ (position[:, None] + torch.arange(vocab_size)))
    return (((h >> 41) & (2**23 - 1)).float() + 0.5) * 2.0**-23


def test_my_uniform_is_uniform_noise():
    seed, position = torch.tensor([3, 2**40 + 7]), torch.tensor([0, 999])
    assert torch.equal(my_uniform(seed, position, 300), uniform_noise(seed, position, 300))


def test_the_end_probes_reach_the_ends():
    """The checker's probe keys: one whose top 23 bits are all 0, one whose hash over 2**64
    rounds to one half in float32."""
    seed = torch.tensor(nb09.ENDS_SEEDS)
    args = (seed, torch.zeros_like(seed), None, nb09.ENDS_V)
    assert top_bits_times_ulp(*args)[0].min() == 0
    assert hash_over_two_to_the_64(*args)[1].max() == 1
    assert ((my_hash(*args[:2], nb09.ENDS_V)[2] >> 40) & (2**24 - 1)).max() == 2**24 - 1
    assert bool(((my_noise_key(*args) > 0) & (my_noise_key(*args) < 1)).all())


def rarely_at_an_end(seed, position, row, vocab_size):
    """20 bits to [0, 1] both ends included: exactly 0 or 1 about once in 500,000 draws."""
    bits = (my_uniform(seed, position, vocab_size) * 2**23).long() >> 3
    return bits.float() / (2**20 - 1)


def test_noise_key_right(capsys):
    assert_ok(check_noise_key, my_noise_key, capsys)
    assert_ok(check_noise_key, lambda s, p, r, v: my_uniform(s, p, v).double(), capsys)


def _from_hash(h, low=False, dtype=torch.float32):
    bits = (h if low else h >> 41) & (2**23 - 1)
    return (bits.to(dtype) + 0.5) * 2.0**-23


@pytest.mark.parametrize(
    "answer",
    [
        lambda s, p, r, v: _from_hash(my_hash(s, p, v), low=True),
        lambda s, p, r, v: _from_hash(other_hash(s, p, v)),
        lambda s, p, r, v: _from_hash(my_hash(s, p, v), dtype=torch.float64),
        lambda s, p, r, v: _from_hash(
            splitmix64(splitmix64(splitmix64(s) ^ p)[:, None] + torch.arange(v, device=s.device))),
        lambda s, p, r, v: _from_hash(
            splitmix64(splitmix64((s << 32) | p)[:, None] ^ torch.arange(v, device=s.device))),
    ],
    ids=["low 23 bits", "position hashed first", "float64", "the id added, then hashed",
         "(seed << 32) | position"],
)  # fmt: skip
def test_noise_key_right_in_other_forms(answer, capsys):
    assert_ok(check_noise_key, answer, capsys)


def test_noise_key_rarely_at_an_end_passes_the_small_draws():
    """Only the many draws show it: the check for exactly 0 or 1 needs them."""
    g = torch.Generator().manual_seed(9)
    s, p = torch.randint(0, 2**40, (16,), generator=g), torch.randint(0, 1000, (16,), generator=g)
    u = rarely_at_an_end(s, p, None, nb09.WIDE_V)
    assert bool(((u > 0) & (u < 1)).all())


def test_noise_key_that_exits_gets_a_hint(capsys):
    def exits(*args):
        raise SystemExit

    assert_hint(check_noise_key, exits, capsys, "SystemExit")


@pytest.mark.parametrize(
    "answer, needles",
    [
        (lambda s, p, r, v: my_uniform(s + r, p, v), ("alone in row 0 and batched in row 2",)),
        (lambda s, p, r, v: my_uniform(s, p + r, v), ("row 2",)),
        (lambda s, p, r, v: torch.rand(len(s), v), ("torch.rand",)),
        (lambda s, p, r, v: my_uniform(s, torch.zeros_like(p), v), ("positions 5 and 6",)),
        (lambda s, p, r, v: my_uniform(torch.zeros_like(s), p, v), ("depend on the seed",)),
        (lambda s, p, r, v: torch.stack([
            torch.rand(v, generator=torch.Generator().manual_seed(int(a) * 1000 + int(b)))
            for a, b in zip(s, p)]), ("captured on 4 requests", "no .item()")),
        (lambda s, p, r, v: my_uniform(s, p, v)[:, :4], ("shape (4, 4)",)),
        (lambda s, p, r, v: my_uniform(s, p, v) * 2, ("outside (0, 1)",)),
        (lambda s, p, r, v: (my_uniform(s, p, v) * 1e6).long(), ("torch.int64",)),
        (lambda s, p, r, v: my_uniform(s, p, 1).expand(-1, v),
         ("one value", "for every vocab id", "greedy")),
        (lambda s, p, r, v: my_uniform(s, p, 4).repeat(1, v)[:, :v],
         ("only 4 distinct values",)),
        (lambda s, p, r, v: my_uniform(s + p, torch.zeros_like(p), v),
         ("(seed 11, position 6) and (seed 12, position 5)", "collide")),
        (lambda s, p, r, v: my_uniform(s * p, torch.zeros_like(p), v),
         ("(seed 9, position 5) and (seed 5, position 9)", "collide")),
        (lambda s, p, r, v: my_uniform(s ^ p, torch.zeros_like(p), v), ("collide",)),
        (lambda s, p, r, v: my_uniform(s, p, v).sort(-1).values, ("rise", "sorting the draws")),
        (lambda s, p, r, v: my_uniform(s, p, v).sort(-1, descending=True).values,
         ("fall", "sorting the draws")),
        (lambda s, p, r, v: ((((splitmix64(splitmix64(s) ^ p)[:, None] + (torch.arange(v) << 41))
                               >> 41) & (2**23 - 1)).float() + 0.5) * 2.0**-23,
         ("rise", "mixing the id in after the hash", "splitmix64(h ^ id)")),
        (lambda s, p, r, v: my_uniform(s, p, v) ** 2, ("mean", "not uniform")),
        (lambda s, p, r, v: torch.floor(my_uniform(s, p, v) * 1024) / 1023,
         ("exactly 0:", "never drawn", "Add one half")),
        (lambda s, p, r, v: my_uniform(s, p, v).half(), ("torch.float16", "rounds", "float32")),
        (lambda s, p, r, v: my_uniform(s, p, v).bfloat16(), ("torch.bfloat16", "no .half()")),
        (rarely_at_an_end, ("exactly 0:", "never drawn")),
        (lambda s, p, r, v: uniform_noise(s, p, v), ("calls generation.uniform_noise",)),
        (top_bits_times_ulp, ("seeds [12943, 119692, 13297]", "exactly 0:", "Add one half")),
        (hash_over_two_to_the_64, ("seeds [12943, 119692, 13297]", "exactly 1:", "rounds to 1.0")),
        (lambda s, p, r, v: ((my_hash(s, p, v) >> 41) & (2**23 - 1)).float().add(1) * 2.0**-23,
         ("seeds [12943, 119692, 13297]", "exactly 1:", "Add one half, not one")),
        (lambda s, p, r, v: ((my_hash(s, p, v) >> 40) & (2**24 - 1)).float().add(0.5) * 2.0**-24,
         ("seeds [12943, 119692, 13297]", "exactly 1:", "24 significant bits")),
        (lambda s, p, r, v: (((my_hash(s, p, v) >> 40) & (2**24 - 1)).double().add(0.5)
                             * 2.0**-24).float(),
         ("exactly 1:", "a float64 uniform turned to float32 at the end")),
        (lambda s, p, r, v: ((other_hash(s, p, v) >> 41) & (2**23 - 1)).float() * 2.0**-23,
         ("not all of the form (k + 0.5) * 2**-b", "(bits + 0.5) * 2**-23")),
        (lambda s, p, r, v: ((other_hash(s, p, v) >> 40) & (2**24 - 1)).float().add(0.5) * 2.0**-24,
         ("off the grid", "more bits than float32 holds")),
        (lambda s, p, r, v: (my_hash(s, p, v) >> 41).float() * 2.0**-23,
         ("negative values", "Mask")),
        (lambda s, p, r, v: (my_noise_key(s, p, r, v), s.zero_())[0], ("changed its input seed",)),
        (lambda s, p, r, v: my_noise_key(s, p.add_(1), r, v), ("changed its input position",)),
        (added_position, ("shifted by one vocab id",)),
        (lambda s, p, r, v: ((splitmix64(splitmix64(s)[:, None] + p[:, None] * 64
                                         + torch.arange(v)) >> 41) & (2**23 - 1)).float()
         .add(0.5) * 2.0**-23, ("share 449 of their 512 draws",)),
        (lambda s, p, r, v: ((splitmix64(splitmix64(s * 31 + p)[:, None] ^ torch.arange(v))
                              >> 41) & (2**23 - 1)).float().add(0.5) * 2.0**-23,
         ("(seed 100, position 31) and (seed 101, position 0)", "drew the same noise")),
        (id_multiplied, ("id 0's noise is the same for every request and position",
                         "before the last hash (h ^ id, then splitmix64)", "not multiplied")),
        (id_hashed_apart, ("is the same for every request", "hashed apart from the key",
                           "xored in after", "splitmix64(h ^ id)")),
        (bumps_position_in_place, ("changed its input position",
                                   "position + 1, not position.add_(1)")),
        (lambda s, p, r, v: ((my_hash(s, p, v) >> 48) & (2**16 - 1)).float().add(0.5) * 2.0**-16,
         ("made from 16 bits", "(h >> 41) & (2**23 - 1)")),
    ],
    ids=["seed + row", "position + row", "torch.rand", "no position", "no seed",
         "a generator per row on the host", "shape", "range", "ints", "one per row",
         "a few per row", "seed + position", "seed * position", "seed ^ position", "sorted",
         "sorted descending", "the id added after the hash", "squared", "0 and 1 often",
         "float16", "bfloat16", "0 and 1 rarely",
         "the package's own", "bits * 2**-23", "hash / 2**64 + 0.5", "(bits + 1) * 2**-23",
         "24 bits in float32", "24 bits in float64, then float32",
         "another order, bits * 2**-23", "another order, 24 bits",
         "an arithmetic shift", "zeroes the seed", "bumps the position", "position + id",
         "position * 64 + id", "seed * 31 + position", "the id multiplied",
         "the id hashed apart", "position += 1", "16 bits"],
)  # fmt: skip
def test_noise_key_wrong(answer, needles, capsys):
    out = assert_hint(check_noise_key, answer, capsys, *needles)
    assert "x.div_(t)" not in out  # exercise 1's example, not this one's


def test_noise_key_of_a_width_of_its_own_is_told_the_columns(capsys):
    def own_width(seed, position, row, vocab_size):
        return my_uniform(seed, position, 258)

    out = assert_hint(check_noise_key, own_width, capsys, "(4, 258)", "vocab_size columns",
                      "not a number of your own")  # fmt: skip
    assert "one row of uniforms per request" not in out


def test_noise_key_of_the_signed_hash_unshifted_is_not_told_of_a_shift(capsys):
    def signed(seed, position, row, vocab_size):
        return my_hash(seed, position, vocab_size).double().div(2**63).float()

    out = assert_hint(check_noise_key, signed, capsys, "negative", "signed int64",
                      "(h >> 41) & (2**23 - 1)", "(bits + 0.5) * 2**-23")  # fmt: skip
    assert "copies the sign bit" not in out


def test_noise_key_without_a_column_of_hashes_gets_a_hint(capsys):
    def no_column(seed, position, row, vocab_size):
        h = splitmix64(splitmix64(seed) ^ position)  # (B,): no [:, None]
        bits = (splitmix64(h ^ torch.arange(vocab_size)) >> 41) & (2**23 - 1)
        return (bits.float() + 0.5) * 2.0**-23

    assert_hint(check_noise_key, no_column, capsys, "must match the size", "(B,)",
                "h[:, None]", "(B, V) grid")  # fmt: skip


@pytest.mark.parametrize(
    "combine", [lambda a, b: a + b, lambda a, b: a ^ b], ids=["hashes added", "hashes xored"]
)
def test_noise_key_symmetric_in_seed_and_position_is_told_so(combine, capsys):
    """The seed hashed first, as the old hint said, and the position hashed on its own:
    the key is symmetric, and the hint says so instead of "hash the seed first"."""

    def symmetric(seed, position, row, vocab_size):
        h = combine(splitmix64(seed), splitmix64(position))[:, None]
        bits = (splitmix64(h ^ torch.arange(vocab_size)) >> 41) & (2**23 - 1)
        return (bits.float() + 0.5) * 2.0**-23

    out = assert_hint(check_noise_key, symmetric, capsys,
                      "(seed 9, position 5) and (seed 5, position 9)", "symmetric",
                      "splitmix64(splitmix64(seed) ^ position)")  # fmt: skip
    assert "Hash the seed first" not in out


def test_a_patched_uniform_noise_does_not_change_the_reference(capsys, monkeypatch):
    """A learner who patches generation.uniform_noise to ignore the seed, then samples with
    it, is not told [OK]: the checker's reference keeps the noise as it was."""
    from tinyllm import generation

    real = generation.uniform_noise
    monkeypatch.setattr(generation, "uniform_noise", lambda s, p, v: real(s * 0, p, v))

    def seed_ignored(x, t, s, p):
        g = -torch.log(-torch.log(generation.uniform_noise(s, p, x.shape[-1])))
        tt = torch.where(t > 0, t, 1.0)[:, None]
        return torch.where(t > 0, (x / tt + g).argmax(-1), x.argmax(-1))

    out = assert_hint(check_step_sampling, seed_ignored, capsys, "a sampled row takes")
    assert "calls generation" not in out


@pytest.mark.parametrize("stride", [2, 8, 64])
def test_noise_key_whose_seed_reaches_another_ids_is_refused(stride, capsys):
    """splitmix64(seed + position * stride + id): (seed + 1, position) draws what (seed,
    position) draws at id + 1, so neighbouring requests share almost all their draws."""

    def key(s, p, r, v):
        h = splitmix64(s[:, None] + p[:, None] * stride + torch.arange(v))
        return ((h >> 41) & (2**23 - 1)).float().add(0.5) * 2.0**-23

    assert_hint(check_noise_key, key, capsys, "share", "of their 512 draws")


# --- the seventh read: copies to the host, tensors off the device, the real slip named -------


def sampling_on_host_copies(logits, temperature, seed, position):
    t, s, p = temperature.to("cpu"), seed.to("cpu"), position.to("cpu")  # right on a CPU
    return my_step_sampling(logits, t, s, p)


def sampling_without_the_temperature(logits, temperature, seed, position):
    g = _gumbel_of(seed, position, logits.shape[-1])
    return torch.where(temperature > 0, (logits + g).argmax(-1), logits.argmax(-1))


def sampling_with_an_if_then_dividing_by_0(logits, temperature, seed, position):
    if (temperature == 0).all():  # a Python if on a tensor; then every row divided
        return logits.argmax(-1)
    return (logits / temperature[:, None] + _gumbel_of(seed, position, logits.shape[-1])).argmax(-1)


def test_step_sampling_on_host_copies_gets_a_hint(capsys):
    assert_hint(check_step_sampling, sampling_on_host_copies, capsys,
                "copies a tensor to the host", '.to("cpu")')  # fmt: skip


def test_step_sampling_without_the_temperature_is_told_so(capsys):
    assert_hint(check_step_sampling, sampling_without_the_temperature, capsys,
                "the temperature changed nothing")  # fmt: skip


def test_step_sampling_with_an_if_names_the_if_first(capsys):
    out = assert_hint(check_step_sampling, sampling_with_an_if_then_dividing_by_0, capsys,
                      "Python `if` on a tensor", "divided by its temperature of 0")  # fmt: skip
    assert out.index("`if`") < out.index("divided by its temperature of 0"), out


def test_hand_out_returning_its_list_twice_is_not_told_of_two_ends(capsys):
    def doubled(reqs, ids, eos_id):
        finished = my_hand_out(reqs, ids, eos_id)
        return finished + finished

    out = assert_hint(check_hand_out, doubled, capsys, "more than once", "[0, 0, 1, 1]")
    assert "two ways" not in out  # neither request ends two ways in that case


def noise_from_host_copies(seed, position, row, vocab_size):
    seed, position = seed.to("cpu"), position.to("cpu")  # right on a CPU
    return my_noise_key(seed, position, row, vocab_size)


def noise_with_a_cpu_arange(seed, position, row, vocab_size):
    h = splitmix64(splitmix64(seed) ^ position)[:, None]
    bits = (splitmix64(h ^ torch.arange(vocab_size)) >> 41) & (2**23 - 1)  # no device=
    return (bits.float() + 0.5) * 2.0**-23


@pytest.mark.parametrize(
    "answer, needles",
    [
        (noise_from_host_copies, ("copies a tensor to the host",)),
        (noise_with_a_cpu_arange, ("a tensor on the CPU (without device=)", "device=seed.device")),
    ],
    ids=['.to("cpu")', "a device-less arange"],
)
def test_noise_key_off_the_device_gets_a_hint(answer, needles, capsys):
    assert_hint(check_noise_key, answer, capsys, *needles)


def test_noise_key_quantised_to_few_values_is_told_so(capsys):
    def thousand_levels(seed, position, row, vocab_size):
        return ((my_hash(seed, position, vocab_size) % 1000).float() + 0.5) / 1000

    out = assert_hint(check_noise_key, thousand_levels, capsys, "1000 distinct values",
                      "every request", "top 23 bits")  # fmt: skip
    assert "mix the id in" not in out  # the id is mixed in: that is not the mistake


def test_step_sampling_over_the_rows_with_a_clamped_temperature_is_told_the_dim(capsys):
    """A clamped temperature hides the argmax over the rows from the square case: the error's
    sizes, one per row against one per vocab id, still tell it from a missing [:, None]."""

    def clamped(x, t, s, p):
        g = -torch.log(-torch.log(uniform_noise(s, p, x.shape[-1])))
        return torch.where(t == 0, x.argmax(-1), (x / t.clamp(min=1e-6)[:, None] + g).argmax(0))

    out = assert_hint(check_step_sampling, clamped, capsys, "argmax over the vocabulary")
    assert "temperature[:, None]" not in out


def test_hand_out_that_calls_the_engines_own_is_told_to_write_it(capsys):
    def engines_own(reqs, ids, eos_id):
        import numpy as np

        return PagedEngine.hand_out(None, np.array(ids))

    assert_hint(check_hand_out, engines_own, capsys, "calls PagedEngine.hand_out", "write")


def test_step_sampling_that_multiplies_is_told_so_on_its_greedy_rows_too(capsys):
    """Multiplying by the temperature zeroes a greedy row's logits, so that row goes wrong
    first: the hint names the multiplication, not noise added to the row."""

    def multiplied(x, t, s, p):
        g = -torch.log(-torch.log(uniform_noise(s, p, x.shape[-1])))
        return (x * t[:, None] + g * (t[:, None] > 0)).argmax(-1)

    out = assert_hint(check_step_sampling, multiplied, capsys, "not multiply")
    assert "add none to a greedy row" not in out


def test_step_sampling_without_the_seed_is_told_the_seed_keys_the_noise(capsys):
    def no_seed(x, t, s, p):
        g = -torch.log(-torch.log(uniform_noise(torch.zeros_like(s), p, x.shape[-1])))
        return torch.where(t > 0, (x / torch.where(t > 0, t, 1.0)[:, None] + g).argmax(-1),
                           x.argmax(-1))  # fmt: skip

    assert_hint(check_step_sampling, no_seed, capsys, "keyed by the request's seed")


def test_step_sampling_that_makes_a_tensor_under_capture_is_told_so(capsys):
    """torch.tensor(1.0) inside the step: a new tensor from host data, not a host read."""

    def new_tensor(logits, temperature, seed, position):
        u = uniform_noise(seed, position, logits.shape[-1])
        one = torch.tensor(1.0, device=temperature.device, dtype=temperature.dtype)
        t = torch.where(temperature > 0, temperature, one)[:, None]
        scores = logits / t - torch.log(-torch.log(u))
        return torch.where(temperature > 0, scores.argmax(-1), logits.argmax(-1))

    out = assert_hint(check_step_sampling, new_tensor, capsys, "made a new tensor from host "
                      "values", "torch.where(t > 0, t, 1.0)")  # fmt: skip
    assert ".item()" not in out


def test_hand_out_with_an_index_error_of_its_own_is_not_told_of_out_minus_one(capsys):
    """An IndexError raised elsewhere than at req.out[-1] is not blamed on req.out[-1]."""

    def one_too_far(reqs, ids, eos_id):
        for i in range(len(reqs) + 1):
            reqs[i]  # IndexError past the last row
        return my_hand_out(reqs, ids, eos_id)

    out = assert_hint(check_hand_out, one_too_far, capsys, "IndexError")
    assert "req.out[-1]" not in out


def test_hand_out_that_drops_the_eos_id_is_told_it_belongs_in_out(capsys):
    """A request that draws eos_id keeps that id as its last token."""

    def drops_eos(reqs, ids, eos_id):
        finished = []
        for req, token_id in zip(reqs, ids):
            if req is None:
                continue
            if len(req.out) == req.max_new_tokens or (req.out and req.out[-1] == eos_id):
                continue
            if eos_id is not None and token_id == eos_id:
                finished.append(req.rid)  # finished, but its eos id never appended
                continue
            req.out.append(token_id)
            if len(req.out) == req.max_new_tokens:
                finished.append(req.rid)
        return finished

    assert_hint(check_hand_out, drops_eos, capsys, "drew eos_id this step", "belongs in out")


def test_hand_out_that_never_finishes_a_request_on_its_first_token_gets_a_hint(capsys):
    def first_token_never_ends(reqs, ids, eos_id):
        finished = []
        for req, token_id in zip(reqs, ids):
            if req is None:
                continue
            if len(req.out) == req.max_new_tokens or (req.out and req.out[-1] == eos_id):
                continue
            if not req.out:
                req.out.append(token_id)
                continue
            req.out.append(token_id)
            if token_id == eos_id or len(req.out) == req.max_new_tokens:
                finished.append(req.rid)
        return finished

    assert_hint(check_hand_out, first_token_never_ends, capsys, "only token")


def test_hand_out_that_returns_from_inside_its_loop_gets_a_hint(capsys):
    def returns_inside(reqs, ids, eos_id):
        finished = []
        for req, token_id in zip(reqs, ids):
            if req is None:
                continue
            if len(req.out) == req.max_new_tokens or (req.out and req.out[-1] == eos_id):
                continue
            req.out.append(token_id)
            if token_id == eos_id or len(req.out) == req.max_new_tokens:
                finished.append(req.rid)
            return finished

    assert_hint(check_hand_out, returns_inside, capsys, "return inside the loop")


def reports_a_finished_request_again(reqs, ids, eos_id):
    """Drops the extra token, yet reports the request that had finished before as finished."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        done = len(req.out) == req.max_new_tokens or (bool(req.out) and req.out[-1] == eos_id)
        if not done:
            req.out.append(token_id)
        if done or token_id == eos_id or len(req.out) == req.max_new_tokens:
            out.append(req.rid)
    return out


def test_hand_out_that_reports_a_finished_request_again_is_told_so(capsys):
    assert_hint(check_hand_out, reports_a_finished_request_again, capsys,
                "had finished at an earlier step", "not finished again")  # fmt: skip


def test_step_sampling_whose_greedy_argmax_has_no_dim_is_told_so(capsys):
    def flat_argmax(logits, temperature, seed, position):
        u = uniform_noise(seed, position, logits.shape[-1])
        t = torch.where(temperature > 0, temperature, 1.0)[:, None]
        noisy = (logits / t - torch.log(-torch.log(u))).argmax(-1)
        return torch.where(temperature > 0, noisy, logits.argmax())  # no dim: a flat index

    assert_hint(check_step_sampling, flat_argmax, capsys, "past the vocabulary",
                "argmax without dim=", "argmax(-1)")  # fmt: skip


def test_hand_out_returning_a_numpy_array_of_rids_passes(capsys):
    assert_ok(check_hand_out, lambda *a: np.array(my_hand_out(*a), dtype=np.int64), capsys)


def test_hand_out_that_tests_eos_ids_truth_in_its_done_check_is_told_so(capsys):
    def truthy_done(reqs, ids, eos_id):
        out = []
        for req, token_id in zip(reqs, ids):
            if req is None:
                continue
            if len(req.out) >= req.max_new_tokens or (eos_id and req.out and req.out[-1] == eos_id):
                continue  # eos_id 0 is falsy: a request that emitted 0 is never done here
            req.out.append(token_id)
            if (eos_id is not None and token_id == eos_id) or len(req.out) == req.max_new_tokens:
                out.append(req.rid)
        return out

    assert_hint(check_hand_out, truthy_done, capsys, "emitted it the step before",
                "never test eos_id's truth")  # fmt: skip


def test_noise_key_clamped_off_the_grid_is_told_of_the_form_asked(capsys):
    def clamped(s, p, r, v):
        bits = (my_hash(s, p, v) >> 41) & (2**23 - 1)
        return (bits.float() * 2.0**-23).clamp(1e-7, 1 - 1e-7)  # no half: 0 clamped away

    assert_hint(check_noise_key, clamped, capsys, "not all of the form", "a clamp")


def eos_reported_anyway(reqs, ids, eos_id):
    """Drops a done request's extra id, yet reports any row whose id is eos_id as finished."""
    out = []
    for req, token_id in zip(reqs, ids):
        if req is None:
            continue
        if not (len(req.out) >= req.max_new_tokens or req.out[-1:] == [eos_id]):
            req.out.append(token_id)
            if len(req.out) >= req.max_new_tokens:
                out.append(req.rid)
        if token_id == eos_id and req.rid not in out:
            out.append(req.rid)
    return out


def test_hand_out_that_finishes_a_done_request_again_at_its_extra_eos_gets_a_hint(capsys):
    assert_hint(check_hand_out, eos_reported_anyway, capsys, "its extra id now is EOS",
                "had finished at an earlier step")  # fmt: skip


def position_after_the_last_hash(seed, position, row, vocab_size):
    """The position added after the last hash: it moves only low bits, under the top 23."""
    h = splitmix64(splitmix64(seed)[:, None] ^ torch.arange(vocab_size, device=seed.device))
    return _from_hash(h + position[:, None])


def test_noise_key_with_the_position_after_the_last_hash_gets_its_reason(capsys):
    assert_hint(check_noise_key, position_after_the_last_hash, capsys, "positions 5 and 6",
                "after the last hash changes only low bits")  # fmt: skip


def python_if_on_the_temperatures(logits, temperature, seed, position):
    if temperature == 0:  # the learner's: one branch for the whole batch
        return logits.argmax(-1)
    return logits.argmax(-1)


def test_step_sampling_with_a_python_if_on_a_tensor_is_told_of_torch_where(capsys):
    assert_hint(check_step_sampling, python_if_on_the_temperatures, capsys, "Boolean value",
                "torch.where(temperature > 0")  # fmt: skip


def hand_out_rows(first, last_skipped):
    """my_hand_out over rows first.. of reqs, one row less at the end if last_skipped."""

    def fn(reqs, ids, eos_id):
        end = len(reqs) - last_skipped
        return my_hand_out(reqs[first:end], ids[first:end], eos_id)

    return fn


@pytest.mark.parametrize("first, last_skipped", [(0, 1), (1, 0)], ids=["last row", "first row"])
def test_hand_out_that_skips_a_row_is_told_the_row_was_never_visited(first, last_skipped, capsys):
    assert_hint(check_hand_out, hand_out_rows(first, last_skipped), capsys, "never visited")
