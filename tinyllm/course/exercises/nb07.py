"""Checkers of notebook 07 · graphs and torch.compile."""

from tinyllm.course.exercises.harness import FAILED, call, hint, ok
from tinyllm.graphs import bucket_for


def check_compile_count(fn) -> bool:
    """fn(start, steps, buckets) → how many graphs dynamo compiles (dynamic=False) for
    `steps` static decode steps from position `start` with these buckets."""

    cases = [
        (10, 100, (32, 64, 128, 256)),
        (0, 1, (128, 1024)),
        (127, 2, (128, 256)),
        (40, 300, (64, 128, 256, 512)),
        (500, 20, (1024,)),
    ]
    for start, steps, buckets in cases:
        want = len({bucket_for(n + 1, buckets) for n in range(start, start + steps)})
        got = call(fn, (start, steps, buckets), f"start={start}, steps={steps}, buckets={buckets}")
        if got is FAILED:
            return False
        if got != want:
            return hint(
                f"start={start}, steps={steps}, buckets={buckets}: you said {got!r}. "
                f"Dynamo compiles once per distinct window: which windows do the "
                f"positions {start}..{start + steps - 1} use?"
            )
    return ok("one compiled graph per window the decode visits")


def check_silent_skip(answer, res: dict) -> bool:
    """answer: the name of the res["fusion"] row where reduce-overhead silently ran
    without a CUDA graph."""
    skipped = [r["name"] for r in res["fusion"]["rows"] if r.get("cudagraph_skips")]
    if answer is None:
        return hint("not answered yet: set answer to one of the row names printed above")
    if answer in skipped:
        return ok(
            f"{answer!r}: Inductor saw the cache tensors mutated in place and skipped "
            f"its CUDA graph, with only a log line to say so"
        )
    names = [r["name"] for r in res["fusion"]["rows"]]
    if answer not in names:
        return hint(f"{answer!r} is not a row name; the rows are {names}")
    return hint(
        f"{answer!r} did replay a graph (or never tried to): look for the row whose "
        f"cudagraph_skips is above 0, and whose step is far slower than any graph's"
    )


def check_fusion_share(fn, res: dict) -> bool:
    """fn(res) → the share of the unfused graph step's time that fusion removes: 1 − (fused
    kernels in bucketed graphs) / (graph, unfused kernels), from res["fusion"]."""
    rows = {r["name"]: r["step_us"] for r in res["fusion"]["rows"]}
    want = 1 - rows["fused kernels in bucketed graphs"] / rows["graph (unfused kernels, bucketed)"]
    got = call(fn, (res,), "the recorded fusion rows")
    if got is FAILED:
        return False
    if isinstance(got, (int, float)) and abs(got - (1 - want)) <= 0.01:
        return hint(
            f"{got:.2f} is the ratio of the two step times; the share removed is 1 minus that ratio"
        )
    if not isinstance(got, (int, float)) or abs(got - want) > 0.01:
        return hint(
            f"you said {got!r}; compare the step_us of the two graph rows, and "
            f"give a share between 0 and 1"
        )
    return ok(f"fusion removes {want:.0%} of the graph step's time")
