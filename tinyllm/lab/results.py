"""Recorded GPU measurements (results/), for notebooks that run without a GPU.

load_results() is the shipped recording, results/h200.json: what every checked notebook cell
prints, so that the committed outputs hold on any machine. A learner's own `make bench`
writes results/<gpu>.json; own_results() finds the newest such recording, which the
notebooks show beside the shipped one, in cells that nbval does not compare. Every number
shown from here is labelled with where it was measured (provenance_label), never passed off
as a live measurement.

results/ is found next to the package (a checkout, or `pip install -e .`), else through the
environment variable TINYLLM_RESULTS, else in the current folder or one above it (a
notebook runs in notebooks/); without it, a clear error.
"""

import json
import os
from pathlib import Path

SHIPPED = "h200"


def results_dir() -> Path:
    """The results/ folder, or a ValueError that says how to point to it."""
    env = os.environ.get("TINYLLM_RESULTS")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[2] / "results", Path.cwd() / "results",
                   Path.cwd().parent / "results"]  # fmt: skip
    for folder in candidates:
        if (folder / f"{SHIPPED}.json").is_file():
            return folder
    raise ValueError(
        f"no results/{SHIPPED}.json found (looked in {', '.join(map(str, candidates))}): "
        f"run from the course's repository, or set TINYLLM_RESULTS to its results/ folder"
    )


def _read(path: Path) -> dict:
    res = json.loads(path.read_text())
    res["file"] = path.name  # which recording this is, so load_trace finds its trace
    return res


def _recorded(name: str) -> dict | None:
    """results/<name>, read, or None if it was not recorded."""
    path = results_dir() / name
    return _read(path) if path.exists() else None


def load_results(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>.json (default: the shipped H200 recording), or None if there is none."""
    return _recorded(f"{gpu}.json")


def load_probe(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_probe.json, made by tools/gpu_probe.py (which SDPA kernel a decode step
    runs, what a fully masked row returns on each backend, RMSNorm's kernels), or None if
    it was not recorded."""
    return _recorded(f"{gpu}_probe.json")


def load_diet(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_diet.json, made by tools/diet_stages.py (the kernel diet: each stage's
    commit measured, kernels and step time of its eager, static and replayed step), or None
    if it was not recorded."""
    return _recorded(f"{gpu}_diet.json")


def load_paged(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_paged.json, the bench's paged section (bench.measure_paged: the steps on
    equal footing, the attention call against length, the paged step against position, the
    capture sizes, replay against the eager paged step) with its headline keys, or None if
    it was not recorded."""
    return _recorded(f"{gpu}_paged.json")


def load_engine(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_engine.json, the bench's engine and engine_paged sections (the slot
    engine eager and with graphs; the paged engine's variants beside the graphed slot
    engine, with their host sections, GPU busy shares and timelines), or None if it was not
    recorded."""
    return _recorded(f"{gpu}_engine.json")


def load_floor(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_floor.json (python -m tinyllm.lab.floor): the µs a graph node costs,
    launched three ways, and the replay's fixed cost; its part "barriers", a later run, the µs
    a grid-wide barrier costs, with that run's node floor ("nodes_same_run"); or None."""
    return _recorded(f"{gpu}_floor.json")


def load_fused(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_fused.json: one layer's RoPE, K/V write and attention as one op
    (kernels.rope_write_attend) against the same job as separate ops, per call, at batch 1
    and 8 and two lengths, with each way's kernels; or None."""
    return _recorded(f"{gpu}_fused.json")


def load_inductor_settings(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_inductor_settings.json: the paged fused step compiled with each of
    Inductor's settings added to the course's options ("batch_1", "batch_8": per setting its
    µs per step replayed alone, its kernels and their names); or None."""
    return _recorded(f"{gpu}_inductor_settings.json")


def load_projections(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_projections.json: the paged step with its matrix products as
    hand-written kernels (projections.py) and PDL on the course's kernels, each turned off in
    the same run ("batch_1", "batch_8", ...: per step its µs replayed alone, its kernels and
    their names; gpt-fast + PDL at batch 1 and 8); the kernels against their references;
    replay against the eager step; the step against position; greedy tokens against the plain
    ops'; or None."""
    return _recorded(f"{gpu}_projections.json")


def load_splits(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_splits.json: the paged fused step with more splits a row and with its
    loop pipelined, against 16 splits and the plain loop, in one run ("batch_1", "batch_8":
    µs replayed alone and kernels; "sweep_1", "sweep_8": against position; "attention": the
    op alone); and "tiles", an earlier kernel of 64-key tiles whose last program combines;
    or None."""
    return _recorded(f"{gpu}_splits.json")


def load_folded(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_folded.json: the paged fused step with the attention's combine folded into
    the output projection and one row's projection programs made smaller, against the step
    before, in one run ("batch_1", "batch_8": µs replayed alone, kernels and their names;
    "sweep_1", "sweep_8": against position); and the runs before and after it ("first",
    "at_once", "outputs"), each with its provenance; "prefetch": a fused attention kernel
    that read before PDL's wait, against the package's, not kept; or None."""
    return _recorded(f"{gpu}_folded.json")


def load_fold_rows(gpu: str = "h100") -> dict | None:
    """results/<gpu>_fold_rows.json, recorded on an H100, not the H200 of the other recordings:
    the attention's combine folded into the output projection at 2 to 16 rows, each row's
    programs combining its own splits, against the step before, which ran the combine kernel
    and then a tile of rows ("batch_<B>": the step replayed alone, "before", "now" the fold
    at every batch, at 16 rows "fold <= 8" the package's projections.FOLD_ROWS; "op_alone_us",
    "sweep_8", "exactness", "greedy_vs_before"); "first_run", the same probe an hour before,
    with its provenance; or None."""
    return _recorded(f"{gpu}_fold_rows.json")


def load_short_rows(gpu: str = "h100") -> dict | None:
    """results/<gpu>_short_rows.json, recorded on an H100, not the H200 of the other
    recordings: the paged fused step captured with fewer splits a row than kernels.split_count
    gives, as a second graph for short rows would run it, against the package's rule
    ("package_splits"; "batch_1", "batch_8": the step replayed alone, named "package" and
    "<n> splits"; "sweep_1", "sweep_8": each against position; "logits"); or None."""
    return _recorded(f"{gpu}_short_rows.json")


def load_dot(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_dot.json: the paged step's fused kernel with its products on tensor cores
    where a split holds more than one block (kernels.tensor_cores, kernels.split_passes),
    against the kernel before, in one run ("op_alone_us": the op alone, with its combine and
    its kernel alone; "batch_<B>": the step replayed alone; "sweep_1", "sweep_8": against
    position); and the runs before it, each with its provenance: "variants", the forms tried;
    "first_form", 2 blocks a pass at every batch; "whole_share", a split of 4 blocks in one
    pass at batch 8; "masked_loads", the keys and values past a row's length left unread, not
    kept; "last_combine", the combine in the kernel's last program of a row's K/V head, after
    (an atomic count), not kept; "fixed_blocks", a split's one block read with the row's
    length, not after it, not kept; "short_rows", the op with a row of up to 128 keys attended
    by one program, its combine programs stopping, not kept; "before_the_wait_op", the op with
    its keys read before PDL's wait, not kept; "trigger_first_op" and "trigger_first", the op
    alone and the step with PDL's trigger before the wait, not kept; "cluster_op", the op in
    one kernel, a row's splits meeting at a thread-block cluster's barrier, not kept;
    "row_choice", the op and the step with the form chosen a row at a time, on the device,
    not kept; "prewait_early", the attention reading before PDL's wait with its trigger
    first, not kept; "timing", the op alone timed with its replay's launch in the window and
    hidden, before and after profiler sessions, with and without TEARDOWN_CUPTI=1;
    "launch_rule", the op alone at every power of two of splits and 1, 2 or 4 warps, the step
    under three rules, and TEARDOWN_CUPTI set inside a running process; "split_floor", the op
    alone with a split of at least 2 or 4 blocks, not kept; "step_warps", the step at 2 and 4
    warps in one process; or None."""
    return _recorded(f"{gpu}_dot.json")


def load_sampler(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_sampler.json: generation.sample as one Triton kernel against its tensor
    ops ("ids": the same ids?; "graph": each alone in a graph, µs and kernels a replay, at 1
    to 256 rows; "engine": PagedEngine with each sampler, in one process; "engine_kernels":
    the kernels of one decode replay); and the runs after it, each with its provenance:
    "branches", the kernel's greedy and every-id branches against the kernel without them;
    "engine_scale", the bench's engine_scale section with the kernel; "join_bound", the
    engine's decode graphs with the kernel, with no sampler and with the tensor ops; or None."""
    return _recorded(f"{gpu}_sampler.json")


def load_engine_scale(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_engine_scale.json (python -m tinyllm.lab.bench --sections engine_scale):
    PagedEngine at 1 to 256 rows (lab.engine_time.scale, each run in a process of its own):
    "rows", one run at each size; "repeats", more runs at 32, 128 and 256 rows; "before",
    min_admit=1 there, and "compile", compile=True there; or None."""
    return _recorded(f"{gpu}_engine_scale.json")


def load_hf(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_hf.json (python -m tinyllm.lab.bench --sections hf,sizes): Hugging Face
    transformers beside the course on the same weights ("generate", "engine"), and graphs
    against eager from 3 M to 1.5 B parameters ("sizes"), or None."""
    path = results_dir() / f"{gpu}_hf.json"
    if not path.exists():
        return None
    rec = _read(path)
    rec.update(rec.pop("hf", {}))  # the bench's file holds "generate" and "engine" under "hf"
    return rec


def load_busy_events(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_busy_events.json (results/probes/engine_busy_events.py): the paged
    engine's GPU busy share from CUDA events around its replays, in runs without the
    profiler, or None."""
    return _recorded(f"{gpu}_busy_events.json")


def load_seeded_share(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_seeded_share.json (results/probes/seeded_share.py): seeded requests
    served alone and batched by the paged engine, the share whose tokens agree, or None."""
    return _recorded(f"{gpu}_seeded_share.json")


def load_capture_policy(gpu: str = SHIPPED) -> dict | None:
    """results/<gpu>_capture_policy.json (python -m tinyllm.lab.capture_policy): each preset's
    padding on the bench's workload and its graphs captured into one pool, or None."""
    return _recorded(f"{gpu}_capture_policy.json")


def own_results() -> dict | None:
    """The newest recording other than the shipped one (a learner's `make bench`, by the
    date in its provenance), or None."""
    own = [_read(p) for p in results_dir().glob("*.json") if p.stem != SHIPPED]
    own = [r for r in own if "provenance" in r and "step_time" in r]  # bench files only
    return max(own, key=lambda r: str(r["provenance"].get("date", "")), default=None)


def provenance_label(res: dict) -> str:
    """'recorded on NVIDIA H200, torch 2.11.0+cu130, 2026-11-30, commit abc1234'."""
    p = res.get("provenance", {})
    return (
        f"recorded on {p.get('gpu', 'an unknown GPU')}, torch {p.get('torch', '?')}, "
        f"{p.get('date', 'undated')}, commit {str(p.get('commit', '?'))[:7]}"
    )


def load_trace(res: dict) -> dict | None:
    """The profiled decode steps recorded with res (results/traces/<gpu>.json), or None."""
    path = results_dir() / "traces" / res.get("file", f"{SHIPPED}.json")
    return json.loads(path.read_text()) if path.exists() else None


def launch_bound_batches(res: dict) -> set[int]:
    """The recorded batch sizes at which the CPU needs at least as long to issue an eager
    step as the GPU needs to run its kernels."""
    cpu, gpu = res["cpu_time"], res["gpu_kernel_time"]
    g = dict(zip(gpu["batch"], gpu["eager_us"]))
    return {b for b, c in zip(cpu["batch"], cpu["eager_us"]) if b in g and c >= g[b]}


def capture_cost(res: dict, windows) -> dict:
    """Capture time and pool memory summed over the recorded per-window measurements
    (batch 1, each graph in a fresh pool of its own) for those of `windows` that were
    measured; the rest are listed as not measured, never extrapolated."""
    cap = res["capture"]
    rec = {w: (s, b) for w, s, b in zip(cap["windows"], cap["capture_s"], cap["pool_bytes"])}
    measured = [w for w in windows if w in rec]
    return {
        "measured": measured,
        "not_measured": [w for w in windows if w not in rec],
        "capture_s": sum(rec[w][0] for w in measured),
        "pool_bytes": sum(rec[w][1] for w in measured),
    }
