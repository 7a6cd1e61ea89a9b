"""exercises: every checker accepts a correct answer, and turns a stub or a wrong answer
into a printed hint and False, never an exception. Notebook 04's checkers
and 01's bandwidth floor here; the rest in test_exercises_nb0N.py, one file per notebook."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import types
from functools import cache

import numpy as np
import pytest
import torch
from conftest import (
    JUNK_VALUES,
    WRONG_VALUES,
    Hostile,
    HostileList,
    assert_hint,
    assert_ok,
    failed,
    never_returns,
    passed,
    raising,
    recorded_results,
    returning,
)

from tinyllm.course import exercises as ex
from tinyllm.course.exercises import harness
from tinyllm.lab import simgraph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stub(*args):
    raise NotImplementedError


# --- correct answers, written as a learner would ------------------------------------------


def bandwidth_floor(n_params, bytes_per_param, bandwidth_GBps):
    return n_params * bytes_per_param / (bandwidth_GBps * 1e9) * 1e6


CHECKS = {  # name: (check, correct answer, wrong answer)
    "bandwidth": (
        ex.check_bandwidth_floor,
        bandwidth_floor,
        lambda n, b, bw: n * b / bw,
    ),  # forgot the units
    "stale_reads": (ex.check_stale_reads, "abe", {"a"}),
    "pool_choice": (ex.check_pool_choice, "bd", "bc"),
}
FUNCTION_CHECKS = [name for name, (_, good, _) in CHECKS.items() if callable(good)]


@pytest.mark.parametrize("name", CHECKS)
def test_correct_answer_passes(name, capsys):
    check, good, _ = CHECKS[name]
    assert passed(check(good))
    assert capsys.readouterr().out.startswith("[OK]")


@pytest.mark.parametrize("name", CHECKS)
def test_wrong_answer_gets_a_hint(name, capsys):
    check, _, bad = CHECKS[name]
    assert failed(check(bad))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and "Traceback" not in out


@pytest.mark.parametrize("name", FUNCTION_CHECKS)
def test_stub_gets_a_hint(name, capsys):
    assert failed(CHECKS[name][0](stub))
    assert "not solved yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["bandwidth"])
def test_a_crash_or_a_missing_return_is_a_hint(name, capsys):
    check = CHECKS[name][0]
    assert failed(check(lambda *a: 1 / 0))
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert failed(check(lambda *a: None))
    assert "returned None" in capsys.readouterr().out


def test_unit_slip_is_named(capsys):
    ex.check_bandwidth_floor(lambda n, b, bw: bandwidth_floor(n, b, bw) * 1e3)
    assert "off by 10^3" in capsys.readouterr().out


def test_stale_reads_without_an_answer_gives_nothing_away(capsys):
    assert failed(ex.check_stale_reads(None))
    out = capsys.readouterr().out
    assert out.startswith("[HINT] no answer that reads as letters yet") and "is stale" not in out


# --- what the pool measurement shows (notebook 04, exercise 2) ----------------------------

POOL_WRONG = {  # a wrong answer → what its hint must say
    "b": "(d): the measurement shows it too",  # the order's effect left out
    "bc": "(c): the measurement shows otherwise: captured smallest first, the pool held 2 MiB",
    "bde": "(e): the measurement shows otherwise",  # largest first assumed to end smaller
    "be": "(d): the measurement shows it too",
    "d": "(b): the measurement shows it too",
    "abd": "(a): the measurement shows otherwise: a pool per graph reserves 8 MiB",
    "bdz": "'z' is not one of the options",
    "": "no answer that reads as letters yet",
    None: "no answer that reads as letters yet",
    42: "'2' is not one of the options",
}


@pytest.mark.parametrize("answer", POOL_WRONG, ids=repr)
def test_pool_choice_wrong_answers_get_a_hint(answer, capsys):
    assert failed(ex.check_pool_choice(answer))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and out.count("\n") == 1, out
    assert POOL_WRONG[answer] in out, out


def test_pool_choice_follows_the_measurement_it_is_given(recorded, capsys):
    """The right letters are the ones the measurement passed in shows: had the shared pool
    grown when captured smallest first, (c) and (e) would hold instead of (d)."""
    cap = recorded["capture"]
    assert passed(ex.check_pool_choice("bd", cap))
    grown = dict(cap, smallest_first_pool_bytes=[2**21, 2**21, 2**22, 2**22])
    assert failed(ex.check_pool_choice("bd", grown))
    assert "(c): the measurement shows it too" in capsys.readouterr().out
    assert passed(ex.check_pool_choice("bce", grown))
    no_order = {k: v for k, v in cap.items() if not k.endswith("_first_pool_bytes")}
    assert passed(ex.check_pool_choice("b", no_order))
    assert failed(ex.check_pool_choice("bd", no_order))
    assert "no capture-order rows" in capsys.readouterr().out


@pytest.mark.parametrize(
    "capture", [[1, 2], {}, {"separate_pools_bytes": "8", "shared_pool_bytes": 2}, "cap"]
)
def test_pool_choice_given_junk_for_the_measurement_gives_a_hint(capture, capsys):
    assert failed(ex.check_pool_choice("bd", capture))
    out = capsys.readouterr().out
    assert out.startswith("[HINT] capture must be the pool measurement") and "Traceback" not in out


# --- harness.choices: any answer is letters or a hint, never a traceback ---------------------


@pytest.mark.parametrize(
    "answer, letters",
    [
        ("a, c", {"a", "c"}),
        (["A", "c"], {"a", "c"}),
        (np.array(["a", "b", "e"]), {"a", "b", "e"}),
        (np.array([1, 2]), {"1", "2"}),
        (torch.tensor([1, 2]), {"1", "2"}),
        ({"a": 1}, {"a", "1"}),
        (None, set()),
        (Hostile(), set()),
        (HostileList(["a"]), set()),
    ],
    ids=["str", "list", "numpy letters", "numpy ints", "tensor", "dict", "None", "hostile",
         "hostile list"],
)  # fmt: skip
def test_choices_never_raises(answer, letters):
    assert ex.harness.choices(answer) == letters


def test_stale_reads_takes_a_numpy_array_of_letters(capsys):
    assert_ok(ex.check_stale_reads, np.array(["a", "b", "e"]), capsys)


@pytest.mark.parametrize(
    "answer", ["a, b and e", "A, B, and E", "a, b or e", "(a) (b) & (e)", "a_b_e", ["a", "b", "e"]]
)
def test_letters_with_words_between_them_are_read_as_letters(answer, capsys):
    """'and' and 'or' between letters are words, not the letters n, d, o, r."""
    assert ex.harness.choices(answer) == {"a", "b", "e"}
    assert_ok(ex.check_stale_reads, answer, capsys)


def test_pool_choice_reads_and_between_letters(capsys):
    assert_ok(ex.check_pool_choice, "b and d", capsys)


@pytest.mark.parametrize("answer", [True, False, np.bool_(True), torch.tensor(True), [True]])
@pytest.mark.parametrize("check", [ex.check_stale_reads, ex.check_pool_choice])
def test_a_bool_for_letters_gets_a_hint_about_the_type(check, answer, capsys):
    """True is not read as the letters t, r, u, e: the hint asks for letters in a string."""
    assert ex.harness.choices(answer) == set()
    assert_hint(check, answer, capsys, "no answer that reads as letters", "as a string")


# --- harness: numbers in hints, limits on time ----------------------------------------------


@pytest.mark.parametrize(
    "got, value, want, says",
    [
        (0.2511, 0.2511, 0.2512, "returned 0.2511, expected 0.2512"),
        (0.25100001, 0.25100001, 0.251, "returned 0.25100001, expected 0.251"),
        (torch.tensor(0.251, dtype=torch.float16), 0.250977, 0.251,
         "a torch.float16 tensor 0.25098, which keeps about 3"),
        (np.float32(0.3), 0.30000001192, 0.3, "a numpy.float32 0.30000001, which keeps about 6"),
        (torch.tensor(2.0), 2.0, 1.0, "returned a torch.float32 tensor 2; expected 1"),
    ],
)  # fmt: skip
def test_unequal_never_prints_two_equal_numbers(got, value, want, says):
    assert says in ex.harness.unequal(got, value, want)


def test_time_limits_nest_and_a_learners_except_cannot_swallow_them():
    """Inside a time_limit, an inner one leaves the outer standing; TooSlow is no Exception,
    so `except Exception` in a learner's loop does not hide it."""
    h = ex.harness

    def swallows():
        while True:
            try:
                pass
            except Exception:
                pass

    with pytest.raises(h.TooSlow, match="outer"), h.time_limit(0.5, "outer"):
        with h.time_limit(30.0, "inner"):
            swallows()
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert h.call(swallows, (), "nothing", seconds=0.3) is h.FAILED


def test_a_time_limit_waits_for_an_import_to_end(tmp_path, monkeypatch):
    """A limit that fires while a module is imported waits for the import to end, then stops
    the function: the module is whole, not left half made (torch's lazy imports, on a first
    call into the package's ops, once left torch broken for the session)."""
    h = ex.harness
    (tmp_path / "slow_module_54.py").write_text("import time\ntime.sleep(0.3)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def imports_then_spins():
        import slow_module_54  # noqa: F401

        while True:
            pass

    with pytest.raises(h.TooSlow, match="slow"), h.time_limit(0.5, "slow"):  # × TIME_SCALE
        imports_then_spins()
    assert sys.modules["slow_module_54"].DONE
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_a_checker_in_a_fresh_process_times_no_import_of_torch():
    """Only the package and a checker imported, as after a kernel restart: the first call of
    the package's ops inside a checker's limit imports nothing (the harness imported
    torch._dynamo up front), so a tight limit still sees the learner's call, not torch's
    import, and torch.compile works after it."""
    code = (
        "import torch\n"
        "from tinyllm.course.exercises import check_step_sampling, harness\n"
        "from tinyllm.generation import sample\n"
        "harness.TIME_SCALE = 0.05\n"
        "check_step_sampling(lambda x, t, s, p: sample(x, t, torch.zeros_like(s), s, p))\n"
        "print(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)).tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": ROOT})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("[HINT]") and "calls the package's own sampler" in lines[0], (
        out.stdout
    )
    assert lines[1] == "[2.0, 2.0]"


def bare_except_sleeps():
    while True:
        try:
            time.sleep(0.001)
        except:  # noqa: E722 (the learner's)
            pass


def bare_except_spins():
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722
            continue


def bare_except_twice():
    while True:
        try:
            bare_except_spins()
        except BaseException:
            pass


@pytest.mark.parametrize("fn", [bare_except_sleeps, bare_except_spins, bare_except_twice])
def test_a_bare_except_in_a_learners_loop_cannot_swallow_the_time_limit(fn, capsys):
    """A learner's `except:` catches TooSlow once; it comes again, and the learner's frames
    are then traced until they let it through: a hint, not a hang. Nothing is left armed."""
    h = ex.harness
    tracing = sys.gettrace()
    with h.entered(bare_except_spins) as ran:  # a profile function before: kept, and back after
        assert h.call(fn, (), "nothing", seconds=0.3) is h.FAILED
        assert sys.getprofile() is not None
    assert "did not finish within 0.3 s" in capsys.readouterr().out
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert sys.gettrace() is tracing
    assert sys.getprofile() is None
    assert (ran[bare_except_spins] > 0) == (fn is not bare_except_sleeps)  # counted all along


# --- harness: one rule for numbers (as_int, as_number) ---------------------------------------

INTS = {  # a number of an integer type, in every form the rule takes
    "int": 24,
    "numpy int": np.int64(24),
    "numpy uint8": np.uint8(24),
    "0-dim numpy array": np.array(24),
    "one-element numpy array": np.array([24]),
    "one-element 2-d numpy array": np.array([[24]], dtype=np.int32),
    "0-dim tensor": torch.tensor(24),
    "one-element tensor": torch.tensor([24]),
    "one-element int32 tensor": torch.tensor([[24]], dtype=torch.int32),
}
FLOATS = {  # a real number of a floating type
    "float": 24.0,
    "numpy float": np.float32(24.0),
    "0-dim numpy array": np.array(24.0),
    "one-element numpy array": np.array([24.0]),
    "0-dim tensor": torch.tensor(24.0),
    "one-element float16 tensor": torch.tensor([24.0], dtype=torch.float16),
}
NOT_NUMBERS = {  # never a number
    "bool": True,
    "numpy bool": np.bool_(True),
    "bool array": np.array([True]),
    "bool tensor": torch.tensor(True),
    "str": "24",
    "numpy str": np.str_("24"),
    "two-element array": np.array([24, 25]),
    "two-element tensor": torch.tensor([24, 25]),
    "empty tensor": torch.tensor([]),
    "complex": 24 + 0j,
    "complex tensor": torch.tensor(24 + 0j),
    "object array": np.array([24], dtype=object),
    "list": [24],
    "None": None,
    "meta tensor": torch.empty((), dtype=torch.int64, device="meta"),
}


@pytest.mark.parametrize("value", INTS.values(), ids=INTS)
def test_an_int_in_any_form_is_an_int_and_a_number(value):
    h = ex.harness
    assert h.as_int(value) == 24 and type(h.as_int(value)) is int
    assert h.as_number(value) == 24.0 and type(h.as_number(value)) is float


@pytest.mark.parametrize("value", FLOATS.values(), ids=FLOATS)
def test_a_float_in_any_form_is_a_number_not_an_int(value):
    h = ex.harness
    assert h.as_number(value) == 24.0 and type(h.as_number(value)) is float
    assert h.as_int(value) is None


@pytest.mark.parametrize("value", NOT_NUMBERS.values(), ids=NOT_NUMBERS)
def test_a_bool_or_anything_else_is_no_number(value):
    assert ex.harness.as_int(value) is None and ex.harness.as_number(value) is None


# --- harness: the [OK] or [HINT] line starts a fresh line ------------------------------------


def test_a_checkers_line_starts_fresh_after_a_learners_unfinished_print(capsys):
    """A learner's print(..., end="") or a print cut short by an error leaves its line open;
    the checker's [OK] or [HINT] still starts a line of its own, and stdout is put back."""
    stdout = sys.stdout

    def prints_then_answers(n, b, bw):
        print("computing", end="")
        return bandwidth_floor(n, b, bw)

    def prints_then_fails(n, b, bw):
        print("writing at", Hostile())  # print writes "writing at", then str() raises

    assert passed(ex.check_bandwidth_floor(prints_then_answers))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("computing") and lines[1].startswith("[OK] "), lines
    assert failed(ex.check_bandwidth_floor(prints_then_fails))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("writing at") and lines[1].startswith("[HINT] "), lines
    assert sys.stdout is stdout


def test_a_checkers_line_adds_no_blank_line_after_a_finished_print(capsys):
    def prints_a_line(n, b, bw):
        print("computing")
        return bandwidth_floor(n, b, bw)

    assert passed(ex.check_bandwidth_floor(prints_a_line))
    out = capsys.readouterr().out
    *printed, last = out.splitlines()
    assert set(printed) == {"computing"} and last.startswith("[OK] "), out  # no blank line


@pytest.mark.parametrize("value", JUNK_VALUES.values(), ids=JUNK_VALUES)
def test_readers_never_raise(value):
    h = ex.harness
    h.as_int(value), h.as_number(value), h.items(value), h.shown(value), h.shown_type(value)
    h.equal(value, 5), h.kind(value), h.digits(value)


@pytest.mark.parametrize(
    "value, says",
    [
        ([torch.zeros(2)] * 6, "a list of 6 Tensors"),
        ([1, 2, 3, 4, 5, 6, 7], "a list of 7 ints"),
        ([1], "a list of 1 int"),
        ((1, 2.0), "a tuple of 2 floats/ints"),
        ([None, None], "a list of 2 Nones"),
        ([], "a list of 0 items"),
    ],
    ids=["tensors", "ints", "one int", "mixed", "Nones", "empty"],
)
def test_shown_type_counts_the_elements_in_words(value, says):
    assert ex.harness.shown_type(value) == says


# --- capture and replay a function yourself (notebook 04, exercise 3) ---------------------


@pytest.fixture(autouse=True, scope="module")
def simgraph_warmed():
    """The first op under simgraph imports torch._dynamo, seconds on a busy machine: the
    shortened limits of these tests would count it against the answer checked first."""
    g, x = simgraph.CUDAGraph(), torch.zeros(2)
    with simgraph.graph(g):
        x.mul(2)


def my_capture_replay(f, example, api, *, static=True, warm_up=True, side_stream=True,
                      wait="side", capture=True, copy="before", replay=True,
                      returned="static", wait_after="current"):  # fmt: skip
    """The solution, and, with one keyword changed, each wrong answer a learner gives.
    wait: how the side stream is ordered after the queued work ("side": it waits for the
    current stream; "sync": api.synchronize(); "reversed": the current stream waits for
    it; None). wait_after: how what follows waits for the warm-up ("current": the current
    stream waits for the side stream; "sync", "side sync": api's or the side stream's
    synchronize(); "inside": the current stream's wait, inside the side stream's block,
    where the current stream is the side stream; None)."""
    static_x = example.clone() if static else example
    warm = None
    if warm_up:
        side = api.Stream()
        if wait == "side":
            side.wait_stream(api.current_stream())
        elif wait == "sync":
            api.synchronize()
        elif wait == "reversed":
            api.current_stream().wait_stream(side)
        with api.stream(side) if side_stream else contextlib.nullcontext():
            warm = f(static_x)
            if wait_after == "inside":
                api.current_stream().wait_stream(side)
        if wait_after == "current":
            api.current_stream().wait_stream(side)
        elif wait_after == "sync":
            api.synchronize()
        elif wait_after == "side sync":
            side.synchronize()
    if not capture:
        return lambda x: f(x)
    graph = api.CUDAGraph()
    with api.graph(graph):
        static_out = f(static_x)

    def run(x):
        nonlocal static_x
        if copy == "before":
            static_x.copy_(x)
        elif copy == "rebind":
            static_x = x
        if replay:
            graph.replay()
        if copy == "after":
            static_x.copy_(x)
        if returned == "f":
            return f(x)
        if returned == "clone":
            return static_out.clone()
        if returned == "warm-up":
            return warm
        if returned == "list":
            return static_out.tolist()
        if returned == "raise":
            raise KeyError(x.shape)
        return static_out

    return run


def wrong(**changed):
    return lambda f, example, api: my_capture_replay(f, example, api, **changed)


def test_capture_replay_solved_on_a_cpu(capsys):
    assert passed(ex.check_capture_replay(my_capture_replay, api=simgraph))
    assert capsys.readouterr().out.startswith("[OK] a warm-up on a side stream")


@pytest.mark.parametrize(
    "keywords",
    [{"wait": "sync"}, {"wait_after": "sync"}, {"wait_after": "side sync"}],
    ids=["synchronize before", "synchronize after", "the side stream's synchronize after"],
)
def test_capture_replay_a_synchronize_orders_too(keywords, capsys):
    """A device-wide synchronize() orders the streams as a wait does (it waits for both)."""
    assert_ok(ex.check_capture_replay, wrong(**keywords), capsys)


def test_capture_replay_hands_the_real_streams_to_the_api(capsys):
    """The checker's api wraps api.current_stream(); what reaches the real API is unwrapped."""
    streams = []

    @contextlib.contextmanager
    def graph(cuda_graph, pool=None, stream=None):
        streams.append(stream)
        with simgraph.graph(cuda_graph, pool=pool):
            yield

    api = types.SimpleNamespace(**{n: getattr(simgraph, n) for n in dir(simgraph)})
    api.graph = graph

    def on_the_current_stream(f, example, api):
        static_x, side = example.clone(), api.Stream()
        side.wait_stream(api.current_stream())
        with api.stream(side):
            f(static_x)
        api.current_stream().wait_stream(side)
        g = api.CUDAGraph()
        with api.graph(g, stream=api.current_stream()):
            out = f(static_x)
        return lambda x: (static_x.copy_(x), g.replay(), out)[-1]

    assert passed(ex.check_capture_replay(on_the_current_stream, api=api))
    assert capsys.readouterr().out.startswith("[OK] ")
    assert streams == [simgraph.current_stream()]


def test_capture_replay_picks_the_simulator_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("with CUDA the checker captures real graphs")
    assert passed(ex.check_capture_replay(my_capture_replay))


def prints_inside_capture(f, example, api):
    static_x = example.clone()
    with api.graph(api.CUDAGraph()):
        print(f(static_x))  # a host read: the output is recorded, not computed


def captures_at_every_call(f, example, api):  # a new graph each time run(x) is called
    def run(x):
        static = example.clone()
        graph, side = api.CUDAGraph(), api.Stream()
        side.wait_stream(api.current_stream())
        with api.stream(side):
            f(static)
        api.current_stream().wait_stream(side)
        with api.graph(graph):
            out = f(static)
        static.copy_(x)
        graph.replay()
        return out

    return run


CAPTURE_REPLAY_WRONG = {  # a wrong answer → what its hint must say
    "calls f in run": (wrong(returned="f"), "run(x) calls f again"),
    "no graph at all": (wrong(capture=False), "nothing was captured"),
    "returns f": (lambda f, example, api: f, "nothing was captured"),
    "rebinds the input": (wrong(copy="rebind"), "rebinding a name (static_x = x)"),
    "copies after replay": (wrong(copy="after"), "gave f of the previous x"),
    "no replay": (wrong(replay=False), "call graph.replay()"),
    "returns the warm-up": (wrong(returned="warm-up"), "return the output made inside"),
    "returns a fresh tensor": (wrong(returned="clone"), "returns a new tensor each time"),
    "returns a list": (wrong(returned="list"), "run(x) returned list"),
    "no warm-up": (wrong(warm_up=False), "no warm-up"),
    "warm-up on the current stream": (wrong(side_stream=False), "ran on the current stream"),
    "side stream not waiting": (wrong(wait=None), "side.wait_stream(api.current_stream())"),
    "the first wait reversed": (
        wrong(wait="reversed"),
        "the side stream does not wait for the current one",
    ),
    "no wait after the warm-up": (
        wrong(wait_after=None),
        "the current stream does not wait for the warm-up: call "
        "api.current_stream().wait_stream(side)",
    ),
    "the wait after, inside the side block": (
        wrong(wait_after="inside"),
        "api.current_stream().wait_stream(side) after the `with api.stream(side):` block",
    ),
    "captures on example itself": (wrong(static=False), "run(x) wrote into example"),
    "returns None": (lambda f, example, api: None, "returned None"),
    "raises": (lambda f, example, api: 1 / 0, "raised ZeroDivisionError"),
    "stub": (stub, "not solved yet"),
    "returns a tensor": (lambda f, example, api: example, "returned Tensor: return the function"),
    "not a function": (42, "pass your function itself"),
    "run raises": (wrong(returned="raise"), "on replay 0 your function raised KeyError"),
    "prints inside capture": (prints_inside_capture, "not permitted when stream is capturing"),
    "captures at every call": (
        lambda f, example, api: captures_at_every_call(f, example, api),
        "captures a new graph at every call",
    ),
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU, torch.cuda works")
def test_capture_replay_through_torch_cuda_on_a_cpu_gets_a_hint(capsys):
    assert_hint(ex.check_capture_replay, lambda f, example, api: torch.cuda.CUDAGraph(), capsys,
                "this machine has no CUDA", "never torch.cuda itself")  # fmt: skip


@pytest.mark.parametrize("case", CAPTURE_REPLAY_WRONG)
def test_capture_replay_wrong_answers_get_a_hint(case, capsys):
    answer, says = CAPTURE_REPLAY_WRONG[case]
    assert failed(ex.check_capture_replay(answer, api=simgraph))
    out = capsys.readouterr().out
    assert out.startswith("[HINT]") and out.count("\n") == 1 and "Traceback" not in out
    assert says in out, out


def test_capture_replay_leaves_no_capture_open(capsys):
    """A learner's capture that fails leaves the process working: later checks still pass."""
    assert failed(ex.check_capture_replay(prints_inside_capture, api=simgraph))
    assert repr(torch.ones(1)) == "tensor([1.])"
    assert passed(ex.check_capture_replay(my_capture_replay, api=simgraph))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_capture_replay_on_a_gpu(capsys):
    assert passed(ex.check_capture_replay(my_capture_replay, api=torch.cuda))
    cases = ("calls f in run", "rebinds the input", "returns a fresh tensor", "no warm-up")
    cases += ("side stream not waiting", "no wait after the warm-up")
    cases += ("the wait after, inside the side block",)
    for case in cases:
        assert failed(ex.check_capture_replay(CAPTURE_REPLAY_WRONG[case][0], api=torch.cuda))
        assert CAPTURE_REPLAY_WRONG[case][1] in capsys.readouterr().out


# --- every checker, one registry: junk and wrong types get a hint ---------------------------

FUNCTION_CHECKERS = {  # checkers of a learner's function, with the notebook's other arguments
    "check_bandwidth_floor": ex.check_bandwidth_floor,
    "check_launch_bound": ex.check_launch_bound,
    "check_window_mask": ex.check_window_mask,
    "check_static_write": ex.check_static_write,
    "check_bucket_for": ex.check_bucket_for,
    "check_default_buckets": ex.check_default_buckets,
    "check_wasted_share": ex.check_wasted_share,
    "check_capture_replay": lambda fn: ex.check_capture_replay(fn, api=simgraph),
    "check_first_difference": ex.check_first_difference,
    "check_flip_margin": ex.check_flip_margin,
    "check_admission": ex.check_admission,
    "check_slot_mask": ex.check_slot_mask,
    "check_compile_count": ex.check_compile_count,
    "check_predicted_us": lambda fn: ex.check_predicted_us(fn, recorded_results()),
    "check_block_of": ex.check_block_of,
    "check_blocks_for": ex.check_blocks_for,
    "check_paged_write": ex.check_paged_write,
    "check_replay_loop": lambda fn: ex.check_replay_loop(fn, toy()),
    "check_step_sampling": ex.check_step_sampling,
    "check_hand_out": ex.check_hand_out,
    "check_noise_key": ex.check_noise_key,
    "check_flush_span": ex.check_flush_span,
    "check_admit_count": ex.check_admit_count,
    "check_gain_shown": ex.check_gain_shown,
    "check_idle_share": ex.check_idle_share,
    "check_kernels_to_remove": ex.check_kernels_to_remove,
    "check_form": ex.check_form,
    "check_combiner": ex.check_combiner,
}
NONE_IS_AN_ANSWER = {"check_first_difference", "check_static_write"}  # "no difference", in place
ANSWER_CHECKERS = {  # checkers of a value the learner sets
    "check_token_count": lambda a: ex.check_token_count(a, "naïve café"),
    "check_param_split": ex.check_param_split,
    "check_static_extra_ops": lambda a: ex.check_static_extra_ops(a, shipped()),
    "check_bucket_choice": ex.check_bucket_choice,
    "check_stale_reads": ex.check_stale_reads,
    "check_pool_choice": ex.check_pool_choice,
}
BAD = {**WRONG_VALUES, **JUNK_VALUES}


@cache
def toy():
    from tinyllm import Transformer
    from tinyllm.config import get_config

    torch.manual_seed(0)
    return Transformer(get_config("toy")).eval()


@cache
def shipped():
    from tinyllm import load_pretrained

    return load_pretrained("cpu")


def test_the_registry_holds_every_checker():
    """A checker added to tinyllm.course.exercises joins the tables below, or this fails
    (check_compile_prediction takes the notebook's run as well, and has its own tests)."""
    checkers = {n for n in ex.__all__ if n.startswith("check_")}
    assert (
        checkers - {"check_compile_prediction"} == FUNCTION_CHECKERS.keys() | ANSWER_CHECKERS.keys()
    )


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
@pytest.mark.parametrize("value", BAD.values(), ids=BAD)
def test_a_checker_of_a_function_answers_junk_with_a_hint(name, value, capsys):
    check = FUNCTION_CHECKERS[name]
    assert_hint(check, value, capsys, "pass your function itself")
    if not (value is None and name in NONE_IS_AN_ANSWER):
        assert_hint(check, returning(value), capsys)


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_a_checker_of_a_function_answers_a_stub_a_crash_or_a_hang(name, capsys, monkeypatch):
    monkeypatch.setattr(harness, "TIME_SCALE", 0.02)  # the hang waits out its limit: a short one
    check = FUNCTION_CHECKERS[name]
    assert_hint(check, stub, capsys, "not solved yet")
    assert_hint(check, raising, capsys, "raised ZeroDivisionError")
    assert_hint(check, never_returns, capsys, " s")  # the limit it ran into, in seconds


@pytest.mark.parametrize("name", ANSWER_CHECKERS)
@pytest.mark.parametrize("value", BAD.values(), ids=BAD)
def test_a_checker_of_an_answer_answers_junk_with_a_hint(name, value, capsys):
    assert_hint(ANSWER_CHECKERS[name], value, capsys)


def test_a_verdict_is_not_echoed_by_a_notebook():
    """A cell that ends with a check shows its [OK] or [HINT] line and nothing after it."""
    from IPython.core.interactiveshell import InteractiveShell

    from tinyllm.course.exercises.harness import Verdict

    formatter = InteractiveShell.instance().display_formatter
    assert formatter.format(Verdict(True)) == ({}, {}) == formatter.format(Verdict(False))
    assert Verdict(True) and not Verdict(False)


def test_call_turns_a_learners_exit_into_a_hint_and_lets_an_interrupt_through(capsys):
    from tinyllm.course.exercises.harness import FAILED, call

    def exits(*args):
        sys.exit(1)

    def interrupted(*args):
        raise KeyboardInterrupt

    assert call(exits, (), "the case") is FAILED
    out = capsys.readouterr().out
    assert out.startswith("[HINT] on the case") and "SystemExit" in out and out.count("\n") == 1
    with pytest.raises(KeyboardInterrupt):
        call(interrupted, (), "the case")


@pytest.mark.parametrize("name", sorted(FUNCTION_CHECKERS))
def test_a_checker_of_a_function_answers_an_exit_with_a_hint(name, capsys):
    assert_hint(FUNCTION_CHECKERS[name], lambda *a: sys.exit(0), capsys, "SystemExit")


def test_slot_mask_answered_with_the_package_s_own_gets_a_hint(capsys):
    from tinyllm.course.exercises import check_slot_mask
    from tinyllm.kv_cache import slot_mask

    assert_hint(check_slot_mask, lambda lens, window: slot_mask(lens, window), capsys,
                "calls slot_mask", "write it")  # fmt: skip


def test_admission_that_sorts_the_queue_gets_a_hint(capsys):
    from tinyllm.course.exercises import check_admission

    assert_hint(check_admission, lambda free, queue: list(zip(sorted(free), sorted(queue))),
                capsys, "sorted the queue", "first come")  # fmt: skip


JUNK_IN_THE_CELLS_ARGUMENTS = [  # what a notebook passes beside the answer, broken: a hint
    ("token_count text None", lambda: ex.check_token_count(13, None), "takes the cell's text"),
    ("compile prompt_lens None", lambda: ex.check_compile_prediction((2, 2), lambda d: 2, None,
                                                                      (32, 64)), "prompt_lens"),
    ("compile buckets None", lambda: ex.check_compile_prediction((2, 2), lambda d: 2, [20, 40],
                                                                  None), "buckets must be"),
    ("capture_replay api 'x'", lambda: ex.check_capture_replay(lambda *a: None, api="x"),
     "api must be torch.cuda or tinyllm.lab.simgraph"),
]  # fmt: skip


@pytest.mark.parametrize("what, check, needle", JUNK_IN_THE_CELLS_ARGUMENTS,
                         ids=[j[0] for j in JUNK_IN_THE_CELLS_ARGUMENTS])  # fmt: skip
def test_junk_in_the_cells_own_arguments_gets_a_hint(what, check, needle, capsys):
    assert failed(check())
    out = capsys.readouterr().out
    assert out.startswith("[HINT] ") and needle in out and out.count("\n") == 1, out


def test_a_checker_called_with_the_wrong_arguments_gives_a_hint(capsys):
    """check_x() or check_x(fn, 3): a hint naming what the checker takes, not a TypeError."""
    for args in ((), (lambda *a: 1, 3)):
        assert not ex.check_compile_count(*args)
        assert "check_compile_count takes (fn): call it as the cell does" in capsys.readouterr().out
