"""Recorded GPU measurements (results/), for notebooks that run without a GPU.

A learner's own `python -m tinyllm.lab.bench` writes results/<gpu>.json; the notebooks prefer
it to the shipped H200 recording. Every number shown from here is labelled with where it
was measured (provenance_label), never passed off as a live measurement.
"""

import json
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"  # the repository's results/
SHIPPED = "h200"


def _read(path: Path) -> dict:
    res = json.loads(path.read_text())
    res["file"] = path.name  # which recording this is, so load_trace finds its trace
    return res


def load_results(gpu: str | None = None) -> dict | None:
    """results/<gpu>.json; without gpu, the newest learner recording (by provenance date),
    else the shipped h200.json; None when there is none."""
    if gpu is not None:
        path = RESULTS_DIR / f"{gpu}.json"
        return _read(path) if path.exists() else None
    own = [_read(p) for p in RESULTS_DIR.glob("*.json") if p.stem != SHIPPED]
    if own:
        return max(own, key=lambda r: str(r.get("provenance", {}).get("date", "")))
    return load_results(SHIPPED)


def provenance_label(res: dict) -> str:
    """'recorded on NVIDIA H200, torch 2.11.0+cu130, 2026-11-30, commit abc1234'."""
    p = res.get("provenance", {})
    return (
        f"recorded on {p.get('gpu', 'an unknown GPU')}, torch {p.get('torch', '?')}, "
        f"{p.get('date', 'undated')}, commit {str(p.get('commit', '?'))[:7]}"
    )


def load_trace(res: dict) -> dict | None:
    """The profiled decode steps recorded with res (results/traces/<gpu>.json), or None."""
    path = RESULTS_DIR / "traces" / res.get("file", f"{SHIPPED}.json")
    return json.loads(path.read_text()) if path.exists() else None


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
