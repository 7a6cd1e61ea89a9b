"""Checkers of notebook 01 · launch-bound decode."""

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
    kind,
    ok,
    own_function,
    shown,
    time_limit,
    unequal,
)
from tinyllm.lab.anatomy import VIEW_OPS
from tinyllm.lab.results import launch_bound_batches, load_results


def floor_us(n_params, bytes_per_param, bandwidth_GBps) -> float:
    """The bandwidth floor: every weight's bytes read once, in µs."""
    return n_params * bytes_per_param / (bandwidth_GBps * 1e9) * 1e6


def floor_slips(n_params, bytes_per_param, bandwidth_GBps) -> list[tuple[float, str]]:
    """What the usual slips in the floor give instead of it: (value, what went wrong)."""
    us = floor_us(n_params, bytes_per_param, bandwidth_GBps)
    bits = "off by 8×: a byte is 8 bits, and both the weights and GB/s are counted in bytes"
    gib = "GB/s is 10^9 bytes per second, not 2^30 bytes: that is GiB/s"
    slips = [(us * 8, bits), (us / 8, bits), (us * 1e9 / 2**30, gib), (us * 2**30 / 1e9, gib)]
    if bytes_per_param != 1:
        slips.append(
            (
                us / bytes_per_param,
                "that reads n_params bytes: each weight is bytes_per_param bytes",
            )
        )
    return slips


def _close_in_us(got, case) -> str | None:
    """Within 0.1 % of the floor of `case`, in any real number type (a float16 tensor is that
    close); else what is wrong, named where it is a usual slip."""
    want = floor_us(*case)
    value = as_number(got)
    if value is None:
        return f"returned {shown(got)}, not a number of µs"
    if not math.isfinite(value):
        return f"returned {shown(got)}, not a finite number of µs"
    if math.isclose(value, want, rel_tol=1e-3):
        return None
    slip = next((why for v, why in floor_slips(*case) if math.isclose(value, v, rel_tol=1e-3)), "")
    off = math.log10(abs(value / want)) if value else 0
    if not slip and value and abs(off - round(off)) < 0.01 and round(off):
        slip = f"off by 10^{round(off)}: GB/s is 1e9 bytes/s, and 1 s is 1e6 µs"
    return unequal(got, value, want, " µs") + (f" ({slip})" if slip else "")


@checker
def check_bandwidth_floor(fn) -> Verdict:
    """fn(n_params, bytes_per_param, bandwidth_GBps) → µs to read every weight once."""
    cases = [
        ((3_280_128, 2, 4000.0), "the tiny model in bf16 at 4000 GB/s"),
        ((7_000_000_000, 2, 3350.0), "a 7B model in bf16 at 3350 GB/s"),
        ((1_000_000, 4, 100.0), "1M fp32 weights at 100 GB/s"),
    ]
    return check_cases(
        fn,
        [(a, f"{s} {a}") for a, s in cases],
        lambda *case: case,  # _close_in_us computes the floor, and its slips, from the case
        "the floor is the weight bytes over the bandwidth",
        _close_in_us,
        seconds=2.0,
    )


STATIC_EXTRA = {  # op → why the static step runs it (more often) than eager decode
    "copy_": "the new token is copied into the static input tensor the graph reads",
    "index_select": "RoPE's rows are gathered at the device position pos (two tables)",
    "index_copy_": "keys and values are written at pos in a fixed-size cache (eager appends)",
    "index_fill_": "the step opens its own key in the cache's mask, kept on the device",
    "add_": "the position pos is advanced on the device, inside the step",
}


def static_extra_ops(model=None) -> set[str]:
    """The compute ops the static decode step runs more often than eager decode, counted
    live on the CPU with lab.anatomy (the shipped model unless one is given)."""
    from tinyllm import GraphDecoder, KVCache, load_pretrained
    from tinyllm.generation import decode_step, prefill
    from tinyllm.lab import anatomy
    from tinyllm.lab.prompts import prompt_batch

    model = model or load_pretrained("cpu")
    idx = prompt_batch(1, 32, "cpu")
    cache, dec = KVCache(model.cfg.n_layers), GraphDecoder(model, 1, use_graph=False)
    tok = prefill(model, idx, cache)[:, -1:].argmax(-1)
    dec.prefill(idx)

    def totals(step):
        return anatomy.op_counts(anatomy.step_ops(anatomy.profile_ops(step)), 1)["totals"]

    eager = totals(lambda: decode_step(model, cache, tok, check=False))
    static = totals(lambda: dec.step(tok, check=False))
    return {op for op, n in static.items() if n > eager.get(op, 0)}


@checker
def check_static_extra_ops(answer, model=None) -> Verdict:
    """answer: the set of op names the static step runs (more often) than eager decode."""
    if answer is None:
        return hint("not answered yet: set answer to a set of op names, e.g. {'linear', 'silu'}")
    ops = items(answer, (set, frozenset, list, tuple))
    if ops is None:
        return hint(
            f"answer with a set of op names, e.g. {{'linear', 'silu'}}, got {shown(answer)}"
        )
    if not all(isinstance(op, str) for op in ops):
        return hint(f"the op names are strings, as the tables print them, got {shown(answer)}")
    got = {str.strip(op).removeprefix("aten::") for op in ops}  # str's own methods
    want = static_extra_ops(model)
    if got == want:
        return ok(
            "the static step adds "
            + "; ".join(f"{op}: {STATIC_EXTRA.get(op, 'extra')}" for op in sorted(want))
        )
    missing, extra = sorted(want - got), sorted(got - want)
    no_underscore = [op for op in extra if op + "_" in want]
    if no_underscore:
        op, n = no_underscore[0], len(no_underscore)
        lack = "1 of your names lacks" if n == 1 else f"{n} of your names lack"
        return hint(
            f"{op!r} lacks its trailing _: the static step runs {op + '_'!r}, the in-place "
            f"op, whose name ends in _ as the tables print it ({lack} the _)"
        )
    views = [op for op in extra if f"aten::{op}" in VIEW_OPS]
    if views:
        return hint(
            f"{views[0]!r} is a view: it only relabels a tensor's shape and strides, so it "
            "launches no kernel; the answer holds compute ops only (the tables list views apart)"
        )
    if missing:
        op = missing[0]
        return hint(
            f"the static step also runs {op!r} ({len(missing)} missing in all): look "
            f"for it in the static table's kv_cache, graphs and begin_step rows"
        )
    return hint(
        f"{extra[0]!r} is not run more often by the static step: compare the two "
        f"tables' counts, not only their rows"
    )


def _batch_sizes(got) -> list[int] | str:
    """What fn returned as batch sizes (whole numbers), or what is wrong with it."""
    expected = "return a set of batch sizes (whole numbers, as in res['cpu_time']['batch'])"
    if isinstance(got, (str, bytes, dict)):
        return f"returned {shown(got)} ({kind(got)}): {expected}"
    try:
        with time_limit(2.0, ""):
            batches = [as_int(b) for b in got]
    except TooSlow:
        return f"returned {kind(got)} whose iteration did not end within 2 s: {expected}"
    except Exception:  # not iterable, or an iteration that fails
        return f"returned {shown(got)} ({kind(got)}): {expected}"
    return f"returned {shown(got)}: {expected}" if None in batches else batches


def _explain_times(error: Exception) -> str | None:
    """What a KeyError, TypeError or IndexError on the recording usually means here."""
    if isinstance(error, (KeyError, TypeError, IndexError)):
        return (
            "res['cpu_time'] and res['gpu_kernel_time'] are dicts of lists: 'batch' holds the "
            "batch sizes and 'eager_us' the eager step's times, in the same order. Take "
            "res['cpu_time']['eager_us'][i] and res['gpu_kernel_time']['eager_us'][i] at "
            "batch res['cpu_time']['batch'][i]"
        )
    return None


@checker
def check_launch_bound(fn, res: dict | None = None) -> Verdict | None:
    """fn(res) → the set of batch sizes at which eager decode is launch-bound (the CPU's issue
    time at least the GPU's kernel time), checked on the recording and on altered copies of
    it: a faster CPU, a slower GPU, and one where the two times are equal at a batch size."""
    import copy

    res = res or load_results()
    cases = [(res, "the recording")]
    for name, scale_cpu, scale_gpu in (
        ("a CPU 3× faster", 1 / 3, 1),
        ("a GPU 20× slower", 1, 20),
        ("both", 1 / 2, 8),
    ):
        alt = copy.deepcopy(res)
        alt["cpu_time"]["eager_us"] = [c * scale_cpu for c in alt["cpu_time"]["eager_us"]]
        alt["gpu_kernel_time"]["eager_us"] = [
            g * scale_gpu for g in alt["gpu_kernel_time"]["eager_us"]
        ]
        cases.append((alt, f"the recording with {name}"))
    tie = copy.deepcopy(res)  # kernels as long as the CPU's issue time at the first batch
    cpu, gpu = tie["cpu_time"], tie["gpu_kernel_time"]  # size, then a constant 1.5× that
    tied, first = cpu["batch"][0], cpu["eager_us"][0]
    gpu["eager_us"] = [first if b == tied else first * 1.5 for b in gpu["batch"]]
    shown_tie = (
        f"the recording with GPU kernels that take exactly the CPU's issue time at batch "
        f"{tied} ({first:g} µs), and {first * 1.5:g} µs at every other batch"
    )
    cases.append((tie, shown_tie))
    own = own_function(fn, (copy.deepcopy(res),), launch_bound_batches,
                       "tinyllm.lab.results.launch_bound_batches")  # fmt: skip
    if own is not None:
        return own
    for case, shown_as in cases:
        got = call(fn, (copy.deepcopy(case),), shown_as, seconds=5.0, explain=_explain_times)
        if got is FAILED:
            return False
        batches = _batch_sizes(got)
        if isinstance(batches, str):
            return hint(f"on {shown_as} your function {batches}")
        got = set(batches)
        want = launch_bound_batches(case)
        if got != want:
            b = min(got ^ want)
            at_tie = case is tie and b == tied
            return hint(
                f"on {shown_as}, batch {b} {'is' if b in want else 'is not'} launch-bound: "
                + (
                    "the CPU needs at least as long as the GPU there (>=, not >)"
                    if at_tie
                    else "compare res['cpu_time']['eager_us'] with res['gpu_kernel_time']"
                    "['eager_us'] at the same index of their 'batch' lists"
                )
            )
    return ok(
        f"eager decode is launch-bound at batch {sorted(launch_bound_batches(res))} of "
        f"the recording, and your function follows the times when they change"
    )
