"""What every checker shares: run the learner's code safely and answer with one line.

A checker prints "[OK] ..." or one "[HINT] ..." naming the input it failed on, and returns a
Verdict (`checker`), true for [OK], which a notebook does not echo: a stub that still raises
NotImplementedError, a crash, a function that never returns, a wrong type or a wrong value
all give a hint, never a traceback or a hang. Whatever a learner hands in is read through
the helpers below, which never raise: `as_int`, `as_number`, `items`, `choices`, `shown`,
`shown_type`.

One rule for numbers, in every checker: a number may be a Python int or float, a numpy
scalar, or a tensor or numpy array of one element (0-dim or not); a bool is never a number.
`as_int` takes those of an integer type, `as_number` those of any real type. One exception:
where the answer is the host's arithmetic on plain numbers (notebook 10's counts, notebook
11's idle share, count of kernels and combining split), a tensor or an array is refused, with
a hint that says how to return an int or a float. Letters (`choices`) may be a string
("abe", "a, b and e"), or a list or set of letters.

The [OK] or [HINT] line starts a line of its own, even after a learner's print that did not
end one (`print(x, end="")`, or a print cut short by an error): a checker watches stdout
while it runs.
"""

import contextlib
import functools
import inspect
import io
import math
import numbers
import operator
import os
import re
import signal
import sys
import threading
import time

# torch._dynamo here, outside any time limit: the package's ops, dispatch modes and meta
# tensors import it on their first use (hundreds of modules, about a second)
import torch
import torch._dynamo  # noqa: F401
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

FAILED = object()
CALL_SECONDS = 10.0  # check_cases' limit on one call of a learner's function
OWN_SECONDS = 2.0  # own_function's look at one call: does it run the package's answer?
TIME_SCALE = 1.0  # every limit is its stated seconds × this (the unit tests shorten them all)


class TooSlow(BaseException):
    """Raised into a learner's function that ran out of time. Not an Exception, so that a
    learner's own `except Exception` (or a helper's, such as as_int's) cannot swallow it and
    run on: only call() and the checkers that set a time_limit catch it."""


RETRY_SECONDS = 0.05  # after its limit, time_limit raises TooSlow again this often
IMPORT_SECONDS = 60.0  # the longest time_limit waits for an import to end (wall clock, unscaled)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


class time_limit:
    """`with time_limit(seconds, hint):` interrupts a learner's function that runs past
    `seconds` with TooSlow(hint), which a checker turns into a hint (main thread, Unix only;
    elsewhere no limit). Inside another time_limit, the outer one stands: a checker may limit
    a whole loop of calls, each of which is limited too.

    A bare `except:` in a learner's loop catches even TooSlow. So, until the block ends, it
    comes again every RETRY_SECONDS, and the learner's frames then on the stack are traced:
    the next line each runs raises it again, their `except:` bodies included, so it leaves
    them one by one. A trace function that raises turns tracing off; the profile function
    `_trace_on` turns it on again as each frame is left. Trace and profile functions that
    ran before (a debugger's, entered()'s) are back when the block ends.

    While a module is being imported, TooSlow waits, up to IMPORT_SECONDS: a first call into
    torch may import hundreds of modules (the package's ops import torch._dynamo), and an
    import stopped half done leaves that module broken for the rest of the session."""

    def __init__(self, seconds: float, hint: str):
        self.seconds, self.hint = seconds, hint
        self.armed = self.fired = False
        self.traced = []  # the frames given _raise_again, untraced again as the block ends

    def __enter__(self):
        self.armed = (
            hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0
        )
        if self.armed:
            self.owner = sys._getframe(1)  # the checker's frame: below it runs the learner's
            self.tracing, self.profiling = sys.gettrace(), sys.getprofile()
            self.previous = signal.signal(signal.SIGALRM, self._stop)
            self.grace_until = time.monotonic() + self.seconds * TIME_SCALE + IMPORT_SECONDS
            signal.setitimer(signal.ITIMER_REAL, self.seconds * TIME_SCALE)
        return self

    def _stop(self, signum, frame):
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS * TIME_SCALE)
        if _importing(frame, self.owner) and time.monotonic() < self.grace_until:
            return  # again in RETRY_SECONDS, once the import is done
        if self.fired:  # it was swallowed: trace the learner's frames, if any run
            learners = []
            while frame is not None and frame is not self.owner:
                if not frame.f_code.co_filename.startswith(_PACKAGE):
                    learners.append(frame)
                frame = frame.f_back
            if not learners:
                return  # the checker's own code runs (or this block ends): not the learner
            for frame in learners:
                frame.f_trace = self._raise_again
            self.traced += learners
            sys.settrace(_untraced)  # line events on, for the frames given _raise_again only
            sys.setprofile(self._trace_on)
        self.fired = True
        raise TooSlow(self.hint)

    def _raise_again(self, frame, event, arg):
        if event == "line":
            raise TooSlow(self.hint)  # CPython stops tracing here; _trace_on starts it again
        return self._raise_again

    def _trace_on(self, frame, event, arg):
        """The profile function while the learner's frames are traced: as a frame returns
        (by TooSlow, say), tracing is on again for the frames below it."""
        if self.profiling is not None:
            self.profiling(frame, event, arg)
        if event == "return" and sys.gettrace() is None:
            sys.settrace(_untraced)

    def __exit__(self, error_type, error, traceback):
        if not self.armed:
            return False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)
        if self.fired:
            sys.settrace(self.tracing)
            sys.setprofile(self.profiling)
            for frame in self.traced:
                frame.f_trace = None
        self.owner = self.profiling = None
        self.traced = []
        return False


def _importing(frame, owner) -> bool:
    """Whether frame, or a frame below it above owner (the checker's), runs Python's import
    machinery."""
    while frame is not None and frame is not owner:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _untraced(frame, event, arg):
    """The global trace function while time_limit traces a learner's frames: no new frame."""
    return None


class Verdict:
    """A checker's answer: true after "[OK]", false after a hint. The line is printed already,
    so a notebook cell that ends with the check shows nothing more (no echoed True/False)."""

    __slots__ = ("passed",)

    def __init__(self, passed: bool):
        self.passed = passed

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:
        pass


class _LineWatch:
    """sys.stdout while a checker runs: passes everything through, and remembers whether
    the last text written ended its line."""

    def __init__(self, stream):
        self.stream = stream
        self.at_line_start = True

    def write(self, text):
        if isinstance(text, str) and text:
            self.at_line_start = text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name):  # flush, encoding, isatty, ...: the stream's own
        return getattr(self.stream, name)


def checker(fn):
    """A notebook's checker: what it returns (True, False, or None for a GPU-only bonus run
    without CUDA) handed back as a Verdict, or None. While it runs, stdout is watched, so
    that its [OK] or [HINT] starts a fresh line after whatever the learner's code printed."""

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def check(*args, **kwargs):
        try:
            signature.bind(*args, **kwargs)
        except TypeError as e:  # check_x() or check_x(fn, 3): a hint, not the checker's traceback
            names = ", ".join(signature.parameters)
            hint(f"{fn.__name__} takes ({names}): call it as the cell does ({e})")
            return Verdict(False)
        stdout = sys.stdout
        if stdout is not None:
            sys.stdout = _LineWatch(stdout)
        try:
            out = fn(*args, **kwargs)
        finally:
            sys.stdout = stdout
        return None if out is None else Verdict(bool(out))

    return check


def _say(line: str) -> None:
    """Print a checker's line, on a line of its own."""
    fresh = not getattr(sys.stdout, "at_line_start", True)
    print(("\n" if fresh else "") + line)


def ok(message: str) -> bool:
    _say(f"[OK] {message}")
    return True


def hint(message: str) -> bool:
    _say(f"[HINT] {message}")
    return False


def unsolved(error: NotImplementedError) -> bool:
    """The exercise's own stub, `raise NotImplementedError` (no message), not one that torch
    raised from inside the learner's code ("Cannot copy out of meta tensor", say)."""
    return not error.args


def call(
    fn,
    args: tuple,
    shown: str,
    none_ok: bool = False,
    seconds: float | None = None,
    slow: str | None = None,
    explain=None,
):
    """fn(*args), or FAILED after printing a hint; past `seconds` (None: no limit of its own)
    the call is stopped, and the hint says so (or says `slow`). `explain(error)`, when given,
    adds what an exception of the learner's usually means in this exercise to its hint."""
    if not callable(fn):
        hint(f"pass your function itself (check(my_fn)), not {shown_type(fn)}")
        return FAILED
    limit = (
        time_limit(seconds, slow or f"your function did not finish within {seconds:g} s")
        if seconds is not None
        else contextlib.nullcontext()
    )
    try:
        with limit:
            out = fn(*args)
    except NotImplementedError as e:
        if unsolved(e):
            hint("not solved yet: replace `raise NotImplementedError` with your code")
            return FAILED
        why = explain(e) if explain is not None else None  # torch's: an op without a dtype
        hint(
            f"on {shown} your function raised {type(e).__name__}: {e}" + (f": {why}" if why else "")
        )
        return FAILED
    except TooSlow as e:
        hint(f"on {shown}: {e}")
        return FAILED
    except SystemExit:  # exit() or sys.exit(): not the end of the notebook
        hint(exited(shown))
        return FAILED
    except Exception as e:  # a hint, not a traceback
        why = explain(e) if explain is not None else None
        hint(
            f"on {shown} your function raised {type(e).__name__}: {e}" + (f": {why}" if why else "")
        )
        return FAILED
    if out is None and not none_ok:
        hint(f"on {shown} your function returned None: did you forget `return`?")
        return FAILED
    return out


@contextlib.contextmanager
def entered(*functions, calls=None):
    """Count how many times each of `functions` starts running while the block runs: yields
    a dict function -> count. A list handed as `calls` receives (function, its arguments by
    name) for each call. Read by code object (sys.setprofile), so it sees a function
    however the learner reached it (imported under another name, as a method, through a
    helper of theirs), and a learner cannot patch it away. It tells a checker that the
    package's own function was called where an exercise says to write it, or how many times
    a graph was replayed."""
    codes = {inspect.unwrap(f).__code__: f for f in functions}
    counts = dict.fromkeys(functions, 0)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1
            if calls is not None:
                calls.append((codes[frame.f_code], dict(frame.f_locals)))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(previous)


def quietly(fn, args: tuple, seconds: float = CALL_SECONDS):
    """fn(*args) with its prints swallowed, or FAILED if it raises or runs out of time: a
    second look at a learner's function, whose first call (the checker's) reports the rest."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), time_limit(seconds, "too slow"):
            return fn(*args)
    except (Exception, TooSlow, SystemExit):
        return FAILED


def own_function(fn, args: tuple, function, name: str):
    """fn called once on args, quietly, the package's `function` (named `name`) watched: a
    hint when fn runs it where the exercise asks to write it, else None. Whatever else the
    call does (fails, prints, runs long) is left to the checker's own calls to report."""
    with entered(function) as ran:
        quietly(fn, args, OWN_SECONDS)
    if ran[function]:
        return hint(
            f"your function calls {name}, the package's own answer: this exercise asks you to "
            f"write it yourself"
        )
    return None


class _MadeOnTheHost(BaseException):
    """A tensor made on the CPU met the device's tensors in an op (see _OnTheDevice). Not an
    Exception, as TooSlow is not: a learner's `except Exception` cannot swallow it."""


_COPIES = (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)


class _OnTheDevice(TorchDispatchMode):
    """While a learner's function runs on the meta device: refuses an op that hands it a
    tensor made on the CPU. Meta, like CUDA when it runs eagerly, takes a CPU tensor as an
    index; CUDA under capture refuses that copy to the device. A 0-d CPU tensor is a number
    (Python's scalars reach an op so), except when it is copied."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        given = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        host = [t for t in given if t.device.type == "cpu" and (t.dim() or func in _COPIES)]
        out = func(*args, **kwargs)
        made = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if host and any(t.is_meta for t in given + made):
            raise _MadeOnTheHost(func.name())
        return out


HOST_COPY = (
    'copies a tensor to the host (.to("cpu"), .cpu(), .numpy(), .tolist()): on a GPU a '
    "graph cannot capture that copy, nor would the copy follow the values at replay. Keep "
    "every tensor on the device its inputs are on"
)


NEW_TENSOR_UNDER_CAPTURE = (
    "the step made a new tensor from host values under capture, which the checker refuses. "
    "torch.tensor(...) does that, and so does a Python list used as an index (t[[0, 1, 2]] "
    "or t[list(range(n))]). Made on a GPU, it is a copy to the device that a graph cannot "
    "record: at replay the copy would not run. Made on the CPU, its values are fixed at "
    "capture. Index with a tensor made on the "
    "device (torch.arange(n, device=t.device)), use a Python number where a tensor op takes "
    "one (x // block_size, torch.where(t > 0, t, 1.0)), or compute it from the inputs with "
    "tensor ops"
)


def captured_new_tensor(error: Exception) -> bool:
    """Whether a capture failed because the function made a tensor from host data
    (simgraph's refusal of torch.tensor, torch.as_tensor, torch.asarray)."""
    return "Copying host data into a new tensor" in str(error)


def off_device(fn, args, device: str) -> str | None:
    """What fn does with its tensors on a device other than the CPU, where a CPU run cannot
    tell `.to("cpu")` from `.to(x.device)`: fn(*args) is run with every tensor moved to the
    meta device (shapes without values), as a GPU's tensors are to the host. Says (after
    "your function ") that fn copies one to the host, or makes one on the CPU (without
    device=) and uses it with theirs or returns it; `device` names the device to make it on
    ("seed.device"). None if neither is seen: an error of another kind is not the learner's
    (meta lacks a few ops), nor is running out of time. Never raises."""
    made = (
        "makes a tensor on the CPU (without device=) and {}: on a GPU that mixes devices, "
        "and a graph cannot capture the copy between them. Make it on the inputs' device, "
        f"torch.arange(n, device={device}) say"
    )
    try:
        moved = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
        with time_limit(CALL_SECONDS, "too slow"), _OnTheDevice():
            out = fn(*moved)
        leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    except _MadeOnTheHost as e:
        return made.format(f"uses it with tensors on the device (in {e})")
    except (Exception, TooSlow, SystemExit) as e:
        text = str(e)
        if any(m in text for m in ("copy out of meta", "meta device type tensor to numpy",
                                   "on meta tensors")):  # fmt: skip
            return HOST_COPY
        if "expected device" in text or "same device" in text:
            return made.format("uses it with tensors on the device")
        return None
    if any(t.device.type != "meta" for t in leaves):
        return made.format("returns it")
    return None


def exited(shown: str) -> str:
    """The hint for a learner's function that raised SystemExit (exit(), sys.exit()): a
    checker answers it, it does not end the kernel. KeyboardInterrupt is left to propagate."""
    return (
        f"on {shown} your function raised SystemExit (exit() or sys.exit()): return your "
        f"answer instead of ending the program"
    )


def shown(x, limit: int = 80) -> str:
    """repr(x), cut to `limit` characters; the type's name if even repr fails."""
    try:
        text = repr(x)
    except Exception:
        return f"a {type(x).__name__}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def equal(got, want) -> str | None:
    try:
        if got == want:
            return None
    except Exception:  # an answer whose == raises (or is ambiguous) is not equal
        pass
    g, w = shown(got), shown(want)
    if g == w:  # equal as text, not as values: the types differ
        g, w = f"{g} ({type(got).__name__})", f"{w} ({type(want).__name__})"
    return f"returned {g}, expected {w}"


def _number(x):
    """The Python int or float a number holds under the rule above, else None."""
    if isinstance(x, torch.Tensor):
        if x.numel() != 1 or x.dtype == torch.bool or x.dtype.is_complex:
            return None
        return x.item()  # int or float; raises for a tensor without data (meta)
    if _numpy(x) and hasattr(x, "dtype"):  # a numpy scalar or array
        if x.size != 1 or x.dtype.kind not in "iuf":  # no bool, complex, str or object
            return None
        return x.item()
    if isinstance(x, bool):
        return None
    if isinstance(x, numbers.Integral):
        return operator.index(x)
    return float(x) if isinstance(x, numbers.Real) else None


def as_int(x) -> int | None:
    """x as an int if it is a number of an integer type (the rule above: int, numpy's, a
    one-element integer tensor or array), else None. Not a bool, nor a float (24.0). Never
    raises."""
    try:
        value = _number(x)
    except Exception:  # a tensor without data, or a hostile object
        return None
    return value if type(value) is int else None


def whole(x) -> int | None:
    """x as an int if it is one on the host: a Python int or a numpy integer scalar. Not a
    bool, a float, a tensor or an array: for answers the host does arithmetic with."""
    if type(x) is int:
        return x
    if _numpy(x) and type(x).__name__ != "ndarray" and x.dtype.kind in "iu":  # np.int64(4)
        return int(x)
    return None


def as_number(x) -> float | None:
    """x as a float if it is a real number (the rule above: int, float, numpy's, a
    one-element tensor or array), else None. Not a bool, nor a string. Never raises."""
    try:
        value = _number(x)
        return None if value is None else float(value)
    except Exception:  # as above, or an int too large for a float
        return None


def items(x, kinds=(tuple, list)) -> list | None:
    """The elements of x if it is one of `kinds`, else None (also when its iteration raises)."""
    if not isinstance(x, kinds):
        return None
    try:
        return list(x)
    except Exception:
        return None


def _numpy(x) -> bool:
    return type(x).__module__ == "numpy"


def _plural(name: str) -> str:
    """A type's name for several of them: 'ints', 'Tensors', 'Nones'."""
    if name == "NoneType":
        return "Nones"
    return name if name.endswith("s") else name + "s"  # 'bytes' stays 'bytes'


def shown_type(x) -> str:
    """What a learner returned, in a few words: 'a dict', 'the int 5', 'a list of 3 ints'."""
    try:
        if x is None:
            return "None"
        if isinstance(x, (bool, int, float)) and type(x) in (bool, int, float):
            return f"the {type(x).__name__} {x!r}"
        if isinstance(x, torch.Tensor):
            where = "" if x.device.type == "cpu" else f" on {x.device.type}"
            return f"a {x.dtype} tensor of shape {tuple(x.shape)}{where}"
        if _numpy(x) and hasattr(x, "shape") and x.shape:
            return f"a numpy array of {x.dtype} of shape {tuple(x.shape)}"
        if _numpy(x):
            return f"the numpy.{type(x).__name__} {x}"
        if isinstance(x, (list, tuple)):
            kinds = sorted({type(e).__name__ for e in x})
            if len(x) != 1:
                kinds = [_plural(k) for k in kinds]
            return f"a {type(x).__name__} of {len(x)} {'/'.join(kinds) or 'items'}"
    except Exception:  # a hostile object: its name is all there is to say
        pass
    return f"a {type(x).__name__}"


def digits(x) -> int | None:
    """About how many significant digits x's type keeps: 3 for a float16 tensor, 6 for a
    float32 one, None for a Python or 64-bit float."""
    dtype = getattr(x, "dtype", None)
    try:
        if isinstance(x, torch.Tensor) and dtype.is_floating_point:
            res = torch.finfo(dtype).resolution
        elif _numpy(x) and dtype is not None and dtype.kind == "f":
            import numpy as np

            res = float(np.finfo(dtype).resolution)
        else:
            return None
    except Exception:
        return None
    n = round(-math.log10(res))
    return n if n < 15 else None


def kind(x) -> str:
    """A number's type in a word or two: 'int', 'torch.float16 tensor', 'numpy.float32'."""
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} tensor"
    return f"numpy.{type(x).__name__}" if _numpy(x) else type(x).__name__


def unequal(got, value: float, want: float, unit: str = "") -> str:
    """'returned <got>, expected <want>', with as many significant digits as it takes to
    tell the two apart (4 at least), and got's type named when it is not a Python int or
    float (with the digits it keeps, when that is what differs): never two equal numbers."""
    a = b = ""
    for n in range(4, 18):
        a, b = f"{value:.{n}g}", f"{want:.{n}g}"
        if a != b:
            break
    a, b = f"{a}{unit}", f"{b}{unit}"
    if type(got) in (int, float):
        return f"returned {a}, expected {b}"
    kept = digits(got)  # named where the type's rounding is what sets the two apart
    near = kept and abs(value - want) <= 10 ** (1 - kept) * abs(want)
    kept = f", which keeps about {kept} significant digits" if near else ""
    return f"returned a {kind(got)} {a}{kept}; expected {b}"


def _snapshot(x):
    """A copy of an argument to compare with after a call: tensors cloned, lists and tuples
    copied item by item; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_snapshot(item) for item in x)
    return x


def _unchanged(x, before) -> bool:
    if isinstance(before, torch.Tensor):
        return isinstance(x, torch.Tensor) and x.shape == before.shape and torch.equal(x, before)
    if isinstance(before, (list, tuple)):
        return len(x) == len(before) and all(map(_unchanged, x, before))
    return True


def check_cases(
    fn, cases, reference, done: str, compare=equal, none_ok=False, seconds=CALL_SECONDS, slow=None,
    with_args=False, explain=None, kept=False,
) -> bool:  # fmt: skip
    """Run fn on each (args, shown) case against reference(*args); compare → problem or None
    (with_args: compare(got, want, *args), for hints that name what the case asked). A
    compare that fails on what fn returned (a wrong type) is a hint too. Each call of fn
    gets `seconds` (and `slow` is the hint when it runs out); `explain` is call's. kept: the
    arguments must come back as they went in (the caller reads them again)."""
    for args, shown_as in cases:
        want = reference(*args)
        before = [_snapshot(a) for a in args] if kept else None
        got = call(fn, args, shown_as, none_ok, seconds, slow, explain)
        if got is FAILED:
            return False
        if kept and not all(map(_unchanged, args, before)):
            return hint(
                f"on {shown_as} your function changed its input in place: the caller reads it "
                f"again afterwards. Work on a copy (.clone()), or use ops that return new "
                f"tensors"
            )
        try:
            problem = compare(got, want, *args) if with_args else compare(got, want)
        except Exception:  # what fn returned cannot even be compared: a hint, no traceback
            problem = f"returned {shown_type(got)}, which is not the kind of answer expected"
        if problem:
            return hint(f"on {shown_as} your function {problem}")
    return ok(done)


def _is_bool(x) -> bool:
    """A bool, or a tensor or numpy array (or scalar) of bools."""
    if isinstance(x, torch.Tensor):
        return x.dtype == torch.bool
    return isinstance(x, bool) or (
        _numpy(x) and getattr(getattr(x, "dtype", None), "kind", "") == "b"
    )


CONNECTIVES = frozenset({"and", "or"})  # words between the letters, not letters


def choices(answer) -> set[str]:
    """The letters of a multiple-choice answer, lower-cased: "a, c", "ac", "a and c",
    ['a', 'c'], {'A', 'C'} or a numpy array of letters → {'a', 'c'}. A word of several
    letters is read letter by letter ("ac"), except "and" and "or". A bool (or a bool
    tensor or array) gives the empty set: it is not letters. Any other answer gives the
    letters and digits of its text (5 → {'5'}, a tensor its elements'), so that a checker
    can say what is not an option; one that cannot even be turned into text gives the
    empty set. Never raises."""
    try:
        if answer is None or _is_bool(answer):
            return set()
        if isinstance(answer, torch.Tensor) or _numpy(answer):
            answer = answer.tolist()  # its elements: numbers, or numpy's letters
        if isinstance(answer, (list, tuple, set, frozenset)):
            text = " ".join(str(a) for a in answer if not isinstance(a, bool))
        else:
            text = str(answer)
        words = re.findall(r"[^\W_]+", text.lower())
        return {c for word in words if word not in CONNECTIVES for c in word}
    except Exception:
        return set()


def bits(row) -> str:
    return "".join("1" if x else "0" for x in row.tolist())


def same_mask(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        return f"returned {shown_type(got)}, expected a bool tensor"
    if got.shape != want.shape:
        return f"returned shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if not torch.equal(got, want):
        r = int((got != want).any(dim=1).nonzero()[0])
        return f"returned row {r} = {bits(got[r])}, expected {bits(want[r])} (1 = may attend)"
    return None
