"""One decode step, op by op: what a CPU profile of the step and a GPU trace of its kernels
contain, counted the way notebook 01 reads them.

torch.profiler's events of one step are grouped by the code that issued them (which
module, or which tinyllm function), and the recorded kernels by what they do (matmul,
attention, elementwise, ...). viz.kernels_figure draws the kernel families.
"""

import contextlib
import os
import re
import sys
from collections import Counter


@contextlib.contextmanager
def quiet_stderr():
    """Silence the process's stderr (fd 2) for the block: torch's profiler writes a line
    there when it starts and stops, which a notebook would show as noise."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def profile_ops(fn) -> list:
    """Run fn() once under torch.profiler on the CPU, with Python stacks (so each op knows
    which module called it); returns the profiler's events."""
    from torch.profiler import ProfilerActivity, profile

    with (
        quiet_stderr(),
        profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True) as prof,
    ):
        fn()
    return list(prof.events())


# ops that only reinterpret a tensor's shape or strides: no arithmetic, no GPU kernel
VIEW_OPS = frozenset(
    f"aten::{n}"
    for n in (
        "view",
        "reshape",
        "transpose",
        "permute",
        "chunk",
        "split",
        "slice",
        "select",
        "expand",
        "unsqueeze",
        "squeeze",
        "as_strided",
        "alias",
        "t",
        "_unsafe_view",
        "flatten",
        "unflatten",
        "detach",
        "contiguous",
    )
)
_FRAME = re.compile(r"tinyllm/(\w+)\.py\(\d+\): (\w+)$")


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def step_ops(events) -> list[tuple[str, str, bool]]:
    """profile_ops events → one (issuer, op, in_block) per top-level aten op (an op that no
    other aten op called). issuer: the innermost nn.Module type (Linear, RMSNorm, ...) or
    tinyllm function other than a forward (model.apply_rope, kv_cache.update) above it;
    in_block: whether it ran inside one of the model's Blocks."""
    out = []
    for e in events:
        if not e.name.startswith("aten::"):
            continue
        above = list(_ancestors(e))
        if any(a.name.startswith("aten::") for a in above):
            continue
        issuer, in_block = "other", False
        for a in above:
            module = a.name.startswith("nn.Module: ")
            in_block |= module and a.name[len("nn.Module: ") :].startswith("Block_")
            if issuer == "other":
                frame = _FRAME.search(a.name)
                if module:
                    issuer = a.name[len("nn.Module: ") :].rsplit("_", 1)[0]
                elif frame and frame.group(2) != "forward":
                    issuer = f"{frame.group(1)}.{frame.group(2)}"
        out.append((issuer, e.name.removeprefix("aten::"), in_block))
    return out


def op_counts(ops, n_layers: int) -> dict:
    """step_ops rows → per issuer: compute ops per layer (`per_layer`, `ops`, each block
    runs the same) and outside the blocks (`outside`, `outside_ops`), and view ops (`views`,
    per step); plus the totals, and `totals`: each compute op's count in the whole step."""
    rows, total, totals = {}, Counter(), Counter()
    for issuer, op, in_block in ops:
        r = rows.setdefault(
            issuer, {"ops": Counter(), "outside_ops": Counter(), "views": Counter()}
        )
        view = f"aten::{op}" in VIEW_OPS
        (r["views"] if view else r["ops"] if in_block else r["outside_ops"])[op] += 1
        total["views" if view else "compute"] += 1
        if not view:
            totals[op] += 1
    for issuer, r in rows.items():
        if any(k % n_layers for k in r["ops"].values()):
            raise ValueError(
                f"{issuer}: ops in the blocks {dict(r['ops'])} are not a multiple "
                f"of n_layers {n_layers}"
            )
        r["ops"] = Counter({op: k // n_layers for op, k in r["ops"].items()})
        r["per_layer"], r["outside"] = sum(r["ops"].values()), sum(r["outside_ops"].values())
    return {
        "rows": rows,
        "n_layers": n_layers,
        "compute": total["compute"],
        "views": total["views"],
        "totals": totals,
        "per_layer": sum(r["per_layer"] for r in rows.values()),
        "outside": sum(r["outside"] for r in rows.values()),
    }


def op_table(counts: dict) -> str:
    """op_counts as text: one row per issuer, most ops per layer first."""

    def names(c: Counter) -> str:
        return " ".join(f"{op}×{k}" if k > 1 else op for op, k in c.most_common())

    lines = [f"{'issued by':<18}{'per layer':>10}{'outside':>9}   which ops, per layer"]
    for issuer, r in sorted(counts["rows"].items(), key=lambda kv: (-kv[1]["per_layer"], kv[0])):
        what = [
            names(r["ops"]) if r["ops"] else "",
            f"outside: {names(r['outside_ops'])}" if r["outside_ops"] else "",
            f"views in the step: {names(r['views'])}" if r["views"] else "",
        ]
        lines.append(
            f"{issuer:<18}{r['per_layer']:>10}{r['outside']:>9}   "
            + "; ".join(w for w in what if w)
        )
    lines.append(
        f"{'total':<18}{counts['per_layer']:>10}{counts['outside']:>9}   "
        f"{counts['n_layers']} layers × {counts['per_layer']} + {counts['outside']} = "
        f"{counts['compute']} compute ops; {counts['views']} views"
    )
    return "\n".join(lines)


KERNEL_FAMILIES = (  # (family, substrings of a kernel's name); the first match wins
    ("memcpy", ("memcpy", "memset")),
    ("attention", ("flash", "fmha", "attention", "softmax")),  # before matmul: fmha_cutlass...
    ("matmul", ("gemm", "gemv", "nvjet", "cutlass", "xmma", "matmul", "cublas")),
    ("norm", ("layer_nor", "rms")),
    ("cat", ("cat",)),
    ("index", ("index_elementwise", "indexselect", "gather", "scatter", "embedding")),
    ("elementwise", ("elementwise", "reduce")),
)


def kernel_family(name: str) -> str:
    low = name.lower()
    return next((fam for fam, keys in KERNEL_FAMILIES if any(k in low for k in keys)), "other")


def kernel_families(events: list[dict], step: int | None = None) -> dict[str, int]:
    """GPU events of one traced step (default: the first) → kernels per family."""
    gpu = [e for e in events if e["kind"] == "gpu"]
    step = min(e["step"] for e in gpu) if step is None else step
    counts = Counter(kernel_family(e["name"]) for e in gpu if e["step"] == step)
    return dict(counts.most_common())
