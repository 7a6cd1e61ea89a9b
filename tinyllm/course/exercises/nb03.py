"""Checkers of notebook 03 · buckets."""

import math

from tinyllm.course.exercises.harness import (
    FAILED,
    TooSlow,
    Verdict,
    as_int,
    as_number,
    call,
    check_cases,
    checker,
    hint,
    items,
    ok,
    own_function,
    shown_type,
    time_limit,
    unequal,
)
from tinyllm.graphs import bucket_for, default_buckets, wasted_share
from tinyllm.validate import validate_buckets


def _same_bucket(got, want) -> str | None:
    if as_int(got) is None:
        return f"returned {shown_type(got)}, expected the bucket {want} (an int)"
    if as_int(got) != want:
        return f"returned {as_int(got)}, expected {want}"
    return None


def _refuses(fn, n_keys: int, buckets: tuple) -> bool:
    """fn raises ValueError for n_keys past the last bucket, as graphs.bucket_for does;
    anything else is a hint."""
    shown = f"n_keys={n_keys}, buckets={buckets}"
    try:
        with time_limit(2.0, "your function did not finish within 2 s"):
            got = fn(n_keys, buckets)
    except ValueError:
        return True
    except TooSlow as e:
        return hint(f"on {shown}: {e}")
    except Exception as e:
        return hint(
            f"on {shown} your function raised {type(e).__name__}: no bucket holds "
            f"{n_keys} keys, and bucket_for says so with a ValueError (raise ValueError(...))"
        )
    return hint(
        f"on {shown} your function returned {shown_type(got)}: no bucket holds {n_keys} "
        f"keys, so raise ValueError, as bucket_for does (a window smaller than the keys "
        f"would leave keys out of attention, silently)"
    )


@checker
def check_bucket_for(fn) -> Verdict:
    """fn(n_keys, buckets) → the smallest bucket that holds n_keys; a ValueError when none
    does (n_keys past the last bucket), as graphs.bucket_for raises."""
    own = own_function(fn, (129, (128, 256)), bucket_for, "graphs.bucket_for")
    if own is not None:
        return own
    cases = [(n, (128, 256, 512, 1024)) for n in (1, 127, 128, 129, 256, 257, 1023, 1024)]
    cases += [(n, (16, 24, 36, 54, 81, 100)) for n in (16, 17, 81, 82, 100)] + [(3, (3,))]
    for n_keys, buckets in cases:
        shown = f"n_keys={n_keys}, buckets={buckets}"
        got = call(fn, (n_keys, buckets), shown, seconds=2.0)
        if got is FAILED:
            return False
        problem = _same_bucket(got, bucket_for(n_keys, buckets))
        if problem:
            return hint(f"on {shown} your function {problem}")
    past = [(1025, (128, 256, 512, 1024)), (101, (16, 24, 36, 54, 81, 100)), (4, (3,))]
    if not all(_refuses(fn, n, b) for n, b in past):
        return False
    return ok(
        "the smallest bucket that holds the keys, at every edge, and a ValueError past the last"
    )


def _buckets(max_len, first, growth, rounding) -> tuple[int, ...] | None:
    """default_buckets with another rounding than math.ceil (None past 100 buckets)."""
    out, b = [], first
    while b < max_len and len(out) < 100:
        out.append(b)
        b = max(b + 1, rounding(b * growth))
    return (*out, max_len) if b >= max_len else None


def _same_buckets(got, reference) -> str | None:
    want, case = reference
    buckets = items(got)
    if buckets is None:
        return f"returned {shown_type(got)}, expected a tuple of ints such as {want}"
    for b in buckets:
        if as_int(b) is None:
            return (
                f"returned {shown_type(got)}, holding {shown_type(b)}: a window is a whole "
                f"number of keys (math.ceil returns an int)"
            )
    got = tuple(as_int(b) for b in buckets)
    if got == want:
        return None
    max_len, first = case[0], case[1]
    if first >= max_len and got[:1] == (first,):
        return (
            f"returned {got}, expected {want}: only buckets below max_len are kept, first "
            f"included, then max_len itself; first={first} is not below max_len={max_len}, "
            f"so max_len is the only bucket"
        )
    if got == (*want, want[-1]):
        return f"returned {got}, expected {want}: max_len is a bucket once"
    if got[: len(want) - 1] == want[:-1] and want[-1] not in got:
        return f"returned {got}, expected {want}: the last bucket is always max_len"
    for rounding, how in ((math.floor, "int() rounds down"), (round, "round() rounds to nearest")):
        if got == _buckets(*case, rounding):
            return f"returned {got}, expected {want}: {how}; round up, with math.ceil"
    return f"returned {got}, expected {want}"


@checker
def check_default_buckets(fn) -> Verdict:
    """fn(max_len, first, growth) → graphs.default_buckets(max_len, first, growth). Each
    case gets 2 s: a bucket that stops growing (int(1 * 1.01) == 1) would loop forever.
    Growths such as 1.3 tell math.ceil from int() and round(). The guard max(b + 1, ...)
    changes nothing next to math.ceil (b * growth > b for every float growth > 1, so its
    ceiling is at least b + 1): no case can tell a version without it."""
    own = own_function(fn, (1024, 128, 2), default_buckets, "graphs.default_buckets")
    if own is not None:
        return own
    cases = [
        (1024, 128, 2),
        (1000, 128, 2),
        (100, 128, 2),
        (128, 128, 2),
        (129, 128, 2),
        (1024, 128, 1.5),
        (1024, 16, 3),
        (10, 1, 1.01),
        (1000, 100, 1.3),  # ceil 220, 286, ...; int() 219, 284, ...; round() 220, ..., 629
        (1024, 100, 1.33),
    ]
    return check_cases(
        fn,
        [(c, f"max_len={c[0]}, first={c[1]}, growth={c[2]}") for c in cases],
        lambda *case: (default_buckets(*case), case),
        "your buckets are graphs.default_buckets",
        _same_buckets,
        seconds=2.0,
        slow=(
            "your loop did not end within 2 s: each bucket must be larger than the one "
            "before (int(b * growth) can equal b; round up)"
        ),
    )


# --- exercise 3: the wasted share, as a function ---------------------------------------------


SHARE_TOLERANCE = 1e-6  # relative: a share computed in float32 is right, one in float16 is not


def _same_share(got, want, buckets, max_len) -> str | None:
    value = as_number(got)
    if value is None:
        return f"returned {shown_type(got)}, expected a share between 0 and 1, a float"
    if math.isclose(value, want, rel_tol=SHARE_TOLERANCE, abs_tol=1e-12):
        return None
    windows = [bucket_for(n, buckets) for n in range(1, max_len + 1)]
    wasted = sum(w - n for n, w in enumerate(windows, 1))
    close = lambda x: math.isclose(value, x, rel_tol=SHARE_TOLERANCE)  # noqa: E731
    if close(100 * want):
        return f"returned {value:.4g}, a percentage: give a share between 0 and 1"
    if close(1 - want):
        return (
            f"returned {value:.4g}, the useful share: the question asks for the work on masked keys"
        )
    if close(wasted / sum(range(1, max_len + 1))):
        return (
            f"returned {value:.4g}: that divides by the keys needed, sum(n); the share of "
            f"the work divides by the work done, sum(window)"
        )
    return (
        unequal(got, value, want) + ": sum (window - n) over every n = 1..max_len, divided "
        "by the sum of the windows"
    )


@checker
def check_wasted_share(fn) -> Verdict:
    """fn(buckets, max_len) → graphs.wasted_share(buckets, max_len): the share of a whole
    max_len-token generation's attention work spent on masked keys."""
    own = own_function(fn, ((4, 8), 8), wasted_share, "graphs.wasted_share")
    if own is not None:
        return own
    cases = [
        ((4, 8), 8),
        ((8,), 8),
        ((1, 2, 3), 3),
        ((64, 256, 1024), 1024),
        ((128, 256, 512, 1000), 1000),
        (default_buckets(1024, 128, 1.5), 1024),
    ]
    return check_cases(
        fn,
        [((b, m), f"buckets={b}, max_len={m}") for b, m in cases],
        wasted_share,
        "your share is graphs.wasted_share, on every bucket list tried",
        _same_share,
        seconds=5.0,
        with_args=True,
    )


# --- exercise 4: choose the buckets --------------------------------------------------------

CHOICE_MAX_LEN, CHOICE_GRAPHS, CHOICE_SHARE = 1024, 4, 0.22


@checker
def check_bucket_choice(buckets) -> Verdict:
    """buckets: at most CHOICE_GRAPHS windows, the largest CHOICE_MAX_LEN, wasting less than
    CHOICE_SHARE of a CHOICE_MAX_LEN-token generation's attention work."""
    m, n, share = CHOICE_MAX_LEN, CHOICE_GRAPHS, CHOICE_SHARE
    if buckets is None:
        return hint(f"Not answered yet: set answer to a tuple of at most {n} windows")
    given = items(buckets)
    if given is None or any(as_int(b) is None for b in given):
        return hint(f"give the buckets as a tuple of ints, got {shown_type(buckets)}")
    given = tuple(as_int(b) for b in given)
    twice = sorted({b for b in given if given.count(b) > 1})
    if twice:
        return hint(
            f"buckets {given} hold {', '.join(map(str, twice))} more than once: a bucket is "
            f"one window and one graph, so list each window once"
        )
    try:
        buckets = validate_buckets(given, m)
    except ValueError as e:
        return hint(f"GraphDecoder would refuse these buckets: {e}")
    got = wasted_share(buckets, m)
    if len(buckets) > n:
        return hint(f"{len(buckets)} graphs waste {got:.1%}, but at most {n} graphs are allowed")
    if got >= share:
        return hint(
            f"buckets {buckets} waste {got:.1%}, not below {share:.0%}: most of a long "
            f"generation's work is at long positions, so look at where the top buckets sit"
        )
    return ok(f"{len(buckets)} graphs {buckets} waste {got:.1%} of the attention work")
