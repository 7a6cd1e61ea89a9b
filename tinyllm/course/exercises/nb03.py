"""Checkers of notebook 03 · buckets."""

import math

from tinyllm.course.exercises.harness import (
    FAILED,
    as_int,
    as_number,
    call,
    check_cases,
    hint,
    ok,
    shown_type,
    time_limit,
)
from tinyllm.graphs import bucket_for, check_buckets, default_buckets, wasted_share


def _same_bucket(got, want) -> str | None:
    if as_int(got) is None:
        return f"returned {shown_type(got)}, expected the bucket {want} (an int)"
    if as_int(got) != want:
        return f"returned {as_int(got)}, expected {want}"
    return None


def check_bucket_for(fn) -> bool:
    """fn(n_keys, buckets) → the smallest bucket that holds n_keys."""
    cases = [(n, (128, 256, 512, 1024)) for n in (1, 127, 128, 129, 256, 257, 1023, 1024)]
    cases += [(n, (16, 24, 36, 54, 81, 100)) for n in (16, 17, 81, 82, 100)] + [(3, (3,))]
    return check_cases(
        fn,
        [(c, f"n_keys={c[0]}, buckets={c[1]}") for c in cases],
        bucket_for,
        "the smallest bucket that holds the keys, at every edge",
        _same_bucket,
    )


def _same_buckets(got, want) -> str | None:
    if not isinstance(got, (tuple, list)):
        return f"returned {shown_type(got)}, expected a tuple of ints such as {want}"
    for b in got:
        if as_int(b) is None:
            return (
                f"returned {tuple(got)}, holding {shown_type(b)}: a window is a whole number "
                f"of keys (math.ceil returns an int)"
            )
    got = tuple(int(b) for b in got)
    if got == want:
        return None
    if got == (*want, want[-1]):
        return f"returned {got}, expected {want}: max_len is a bucket once"
    if got[: len(want) - 1] == want[:-1] and want[-1] not in got:
        return f"returned {got}, expected {want}: the last bucket is always max_len"
    return f"returned {got}, expected {want}"


def check_default_buckets(fn) -> bool:
    """fn(max_len, first, growth) → graphs.default_buckets(max_len, first, growth). Each
    case gets 2 s: a bucket that stops growing (int(1 * 1.01) == 1) would loop forever."""
    cases = [
        (1024, 128, 2),
        (1000, 128, 2),
        (100, 128, 2),
        (128, 128, 2),
        (129, 128, 2),
        (1024, 128, 1.5),
        (1024, 16, 3),
        (10, 1, 1.01),
    ]
    with time_limit(
        2.0,
        "your loop did not end within 2 s: each bucket must be larger than "
        "the one before (int(b * growth) can equal b; round up)",
    ):
        return check_cases(
            fn,
            [(c, f"max_len={c[0]}, first={c[1]}, growth={c[2]}") for c in cases],
            default_buckets,
            "your buckets are graphs.default_buckets",
            _same_buckets,
        )


# --- exercise 3: the wasted share, as a function ---------------------------------------------


def _same_share(got, want, buckets, max_len) -> str | None:
    value = as_number(got)
    if value is None:
        return f"returned {shown_type(got)}, expected a share between 0 and 1, a float"
    if math.isclose(value, want, rel_tol=1e-9, abs_tol=1e-12):
        return None
    windows = [bucket_for(n, buckets) for n in range(1, max_len + 1)]
    wasted = sum(w - n for n, w in enumerate(windows, 1))
    if math.isclose(value, 100 * want, rel_tol=1e-9):
        return f"returned {value:.4g}, a percentage: give a share between 0 and 1"
    if math.isclose(value, 1 - want, rel_tol=1e-9):
        return (
            f"returned {value:.4g}, the useful share: the question asks for the work on masked keys"
        )
    if math.isclose(value, wasted / sum(range(1, max_len + 1)), rel_tol=1e-9):
        return (
            f"returned {value:.4g}: that divides by the keys needed, sum(n); the share of "
            f"the work divides by the work done, sum(window)"
        )
    return (
        f"returned {value:.4g}, expected {want:.4g}: sum (window - n) over every "
        f"n = 1..max_len, divided by the sum of the windows"
    )


def check_wasted_share(fn) -> bool:
    """fn(buckets, max_len) → graphs.wasted_share(buckets, max_len): the share of a whole
    max_len-token generation's attention work spent on masked keys."""
    cases = [
        ((4, 8), 8),
        ((8,), 8),
        ((1, 2, 3), 3),
        ((64, 256, 1024), 1024),
        ((128, 256, 512, 1000), 1000),
        (default_buckets(1024, 128, 1.5), 1024),
    ]
    with time_limit(5.0, "your function did not finish within 5 s"):
        for buckets, max_len in cases:
            shown = f"buckets={buckets}, max_len={max_len}"
            got = call(fn, (buckets, max_len), shown)
            if got is FAILED:
                return False
            problem = _same_share(got, wasted_share(buckets, max_len), buckets, max_len)
            if problem:
                return hint(f"on {shown} your function {problem}")
    return ok("your share is graphs.wasted_share, on every bucket list tried")


# --- exercise 4: choose the buckets --------------------------------------------------------

CHOICE_MAX_LEN, CHOICE_GRAPHS, CHOICE_SHARE = 1024, 4, 0.22


def check_bucket_choice(buckets) -> bool:
    """buckets: at most CHOICE_GRAPHS windows, the largest CHOICE_MAX_LEN, wasting less than
    CHOICE_SHARE of a CHOICE_MAX_LEN-token generation's attention work."""
    m, n, share = CHOICE_MAX_LEN, CHOICE_GRAPHS, CHOICE_SHARE
    if buckets is None:
        return hint(f"Not answered yet: set my_buckets to a tuple of at most {n} windows")
    if not isinstance(buckets, (tuple, list)) or any(as_int(b) is None for b in buckets):
        return hint(f"give the buckets as a tuple of ints, got {shown_type(buckets)}")
    try:
        buckets = check_buckets(tuple(int(b) for b in buckets), m)
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
