"""Checkers of notebook 01 · launch-bound decode."""

import math

from tinyllm.course.exercises.harness import FAILED, as_int, call, check_cases, hint, ok
from tinyllm.lab.results import launch_bound_batches, load_results


def _close_in_us(got, want) -> str | None:
    if not isinstance(got, (int, float)) or math.isnan(got):
        return f"returned {got!r}, not a number of µs"
    if math.isclose(got, want, rel_tol=1e-3):
        return None
    off = math.log10(abs(got / want)) if got else 0
    units = (
        f" (off by 10^{round(off)}: GB/s is 1e9 bytes/s, and 1 s is 1e6 µs)"
        if got and abs(off - round(off)) < 0.01 and round(off)
        else ""
    )
    return f"returned {got:.4g} µs, expected {want:.4g} µs{units}"


def check_bandwidth_floor(fn) -> bool:
    """fn(n_params, bytes_per_param, bandwidth_GBps) → µs to read every weight once."""
    cases = [
        ((3_280_128, 2, 4000.0), "the tiny model in bf16 at 4000 GB/s"),
        ((7_000_000_000, 2, 3350.0), "a 7B model in bf16 at 3350 GB/s"),
        ((1_000_000, 4, 100.0), "1M fp32 weights at 100 GB/s"),
    ]
    return check_cases(
        fn,
        [(a, f"{s} {a}") for a, s in cases],
        lambda n, b, bw: n * b / (bw * 1e9) * 1e6,
        "the floor is the weight bytes over the bandwidth",
        _close_in_us,
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
    from tinyllm.lab.bench import prompt_batch

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


def check_static_extra_ops(answer, model=None) -> bool:
    """answer: the set of op names the static step runs (more often) than eager decode."""
    if answer is None:
        return hint("not answered yet: set answer to a set of op names, e.g. {'mul', 'add'}")
    if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
        return hint(f"answer with a set of op names, e.g. {{'mul', 'add'}}, got {answer!r}")
    if not all(isinstance(op, str) for op in answer):
        return hint(f"the op names are strings, as the tables print them, got {answer!r}")
    got = {op.strip().removeprefix("aten::") for op in answer}
    want = static_extra_ops(model)
    if got == want:
        return ok(
            "the static step adds "
            + "; ".join(f"{op}: {STATIC_EXTRA.get(op, 'extra')}" for op in sorted(want))
        )
    missing, extra = sorted(want - got), sorted(got - want)
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


def check_launch_bound(fn, res: dict | None = None) -> bool | None:
    """fn(res) → the set of batch sizes at which eager decode is launch-bound, checked on the
    recording and on altered copies of it (a faster CPU, a slower GPU)."""
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
    for case, shown in cases:
        got = call(fn, (copy.deepcopy(case),), shown)
        if got is FAILED:
            return False
        batches = None
        if not isinstance(got, (str, bytes, dict)):
            try:
                batches = [as_int(b) for b in got]
            except TypeError:  # not iterable
                pass
        if batches is None or None in batches:
            return hint(
                f"on {shown} your function returned {got!r}: return a set of batch sizes "
                f"(whole numbers, as in res['cpu_time']['batch'])"
            )
        got = set(batches)
        want = launch_bound_batches(case)
        if got != want:
            b = min(got ^ want)
            return hint(
                f"on {shown}, batch {b} {'is' if b in want else 'is not'} launch-bound: "
                f"compare res['cpu_time']['eager_us'] with res['gpu_kernel_time']"
                f"['eager_us'] at the same index of their 'batch' lists"
            )
    return ok(
        f"eager decode is launch-bound at batch {sorted(launch_bound_batches(res))} of "
        f"the recording, and your function follows the times when they change"
    )
