"""What every checker shares: run the learner's code safely and answer with one line.

A checker prints "[OK] ..." and returns True, or prints one "[HINT] ..." naming the input it
failed on and returns False: a stub that still raises NotImplementedError, a crash, a wrong
type or a wrong value all give a hint, never a traceback.
"""

import contextlib
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


def check_cases(fn, cases, reference, done: str, compare=equal, none_ok=False) -> bool:
    """Run fn on each (args, shown) case against reference(*args); compare → problem or None."""
    for args, shown in cases:
        want = reference(*args)
        got = call(fn, args, shown, none_ok)
        if got is FAILED:
            return False
        problem = compare(got, want)
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
