"""Checkers of notebook 03 · buckets."""

from tinyllm.course.exercises.harness import check_cases, equal, hint, ok, time_limit
from tinyllm.graphs import bucket_for, default_buckets, wasted_share


def check_bucket_for(fn) -> bool:
    """fn(n_keys, buckets) → the smallest bucket that holds n_keys."""
    cases = [(n, (128, 256, 512, 1024)) for n in (1, 127, 128, 129, 256, 257, 1023, 1024)]
    cases += [(n, (16, 24, 36, 54, 81, 100)) for n in (16, 17, 81, 82, 100)] + [(3, (3,))]
    return check_cases(
        fn,
        [(c, f"n_keys={c[0]}, buckets={c[1]}") for c in cases],
        bucket_for,
        "the smallest bucket that holds the keys, at every edge",
    )


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
            lambda got, want: equal(tuple(got), want),
        )


def check_wasted_share(value, buckets, max_len: int) -> bool:
    """value: share (0..1) of a max_len-token generation's attention work on masked keys."""
    want = wasted_share(buckets, max_len)
    if not isinstance(value, (int, float)):
        return hint(f"answer with a number between 0 and 1, got {value!r}")
    if abs(value - want) <= 0.005:
        return ok(f"{want:.1%} of the attention work with buckets {tuple(buckets)} is wasted")
    if abs(value - 100 * want) <= 0.5:
        return hint("give a share between 0 and 1, not a percentage")
    if abs(value - (1 - want)) <= 0.005:
        return hint("that is the useful share: the question asks for the work on masked keys")
    return hint(
        f"{value:.3g} is off: sum (window - n) over every n = 1..{max_len}, "
        f"divided by the sum of the windows"
    )
