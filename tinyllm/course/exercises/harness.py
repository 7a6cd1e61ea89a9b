"""What every checker shares: run the learner's code safely and answer with one line.

A checker prints "[OK] ..." and returns True, or prints one "[HINT] ..." naming the input it
failed on and returns False: a stub that still raises NotImplementedError, a crash, a wrong
type or a wrong value all give a hint, never a traceback.
"""

import contextlib
import numbers
import operator
import signal
import threading

import torch

FAILED = object()


class TooSlow(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float, hint: str):
    """Interrupt a learner's function that runs past `seconds` (main thread, Unix only;
    elsewhere no limit) and turn it into a hint."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def stop(signum, frame):
        raise TooSlow(hint)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def ok(message: str) -> bool:
    print(f"[OK] {message}")
    return True


def hint(message: str) -> bool:
    print(f"[HINT] {message}")
    return False


def call(fn, args: tuple, shown: str, none_ok: bool = False):
    """fn(*args), or FAILED after printing a hint."""
    if not callable(fn):
        hint(f"pass your function itself (check(my_fn)), not {type(fn).__name__}")
        return FAILED
    try:
        out = fn(*args)
    except NotImplementedError:
        hint("not solved yet: replace `raise NotImplementedError` with your code")
        return FAILED
    except TooSlow as e:
        hint(f"on {shown}: {e}")
        return FAILED
    except Exception as e:  # a hint, not a traceback
        hint(f"on {shown} your function raised {type(e).__name__}: {e}")
        return FAILED
    if out is None and not none_ok:
        hint(f"on {shown} your function returned None: did you forget `return`?")
        return FAILED
    return out


def equal(got, want) -> str | None:
    return None if got == want else f"returned {got!r}, expected {want!r}"


def as_int(x) -> int | None:
    """x as an int if it is a whole number of an integer type (int, numpy's, a one-element
    integer tensor), else None. A bool is not a number here, nor is a float."""
    if isinstance(x, bool) or (isinstance(x, torch.Tensor) and x.dtype == torch.bool):
        return None
    if isinstance(x, torch.Tensor):
        if x.numel() != 1 or x.dtype.is_floating_point or x.dtype.is_complex:
            return None
        return int(x.item())
    try:
        return operator.index(x)
    except TypeError:
        return None


def as_number(x) -> float | None:
    """x as a float if it is a real number (int, float, numpy's, a one-element tensor), else
    None. A bool is not a number here, nor is a string."""
    if isinstance(x, torch.Tensor):
        if x.numel() != 1 or x.dtype == torch.bool or x.dtype.is_complex:
            return None
        return float(x.item())
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    return float(x)


def shown_type(x) -> str:
    """What a learner returned, in a few words: 'a dict', 'the int 5', 'a list of 3 ints'."""
    if x is None:
        return "None"
    if isinstance(x, (bool, int, float)):
        return f"the {type(x).__name__} {x!r}"
    if isinstance(x, torch.Tensor):
        where = "" if x.device.type == "cpu" else f" on {x.device.type}"
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}{where}"
    if isinstance(x, (list, tuple)):
        kinds = sorted({type(e).__name__ for e in x})
        return f"a {type(x).__name__} of {len(x)} {'/'.join(kinds) or 'items'}"
    return f"a {type(x).__name__}"


def check_cases(fn, cases, reference, done: str, compare=equal, none_ok=False) -> bool:
    """Run fn on each (args, shown) case against reference(*args); compare → problem or None.
    A compare that fails on what fn returned (a wrong type) is a hint too."""
    for args, shown in cases:
        want = reference(*args)
        got = call(fn, args, shown, none_ok)
        if got is FAILED:
            return False
        try:
            problem = compare(got, want)
        except Exception:  # what fn returned cannot even be compared: a hint, no traceback
            problem = f"returned {shown_type(got)}, which is not the kind of answer expected"
        if problem:
            return hint(f"on {shown} your function {problem}")
    return ok(done)


def choices(answer) -> set[str]:
    """'a, c', 'ac', ['a', 'c'] or {'A', 'C'} → {'a', 'c'}."""
    text = (
        "".join(map(str, answer)) if isinstance(answer, (list, tuple, set)) else str(answer or "")
    )
    return {c for c in text.lower() if c.isalnum()}


def bits(row) -> str:
    return "".join("1" if x else "0" for x in row.tolist())


def same_mask(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        return f"returned {type(got).__name__} {getattr(got, 'dtype', '')}, expected a bool tensor"
    if got.shape != want.shape:
        return f"returned shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if not torch.equal(got, want):
        r = int((got != want).any(dim=1).nonzero()[0])
        return f"returned row {r} = {bits(got[r])}, expected {bits(want[r])} (1 = may attend)"
    return None
