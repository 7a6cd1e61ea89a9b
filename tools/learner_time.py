"""A learner's time through each notebook, estimated from the notebook itself.

What is counted, per lesson notebook (a solutions twin is not read on a first pass):

- prose: the words of every markdown cell, read at PROSE_WPM;
- code: the lines of every code cell (comments included, blank lines not), read at
  CODE_LINES_PER_MIN;
- outputs: every figure and widget looked at for FIGURE_MIN, every printed line read at
  OUTPUT_LINES_PER_MIN;
- exercises: every call of a checker, EXERCISE_MIN each (write the answer, run the checker,
  read a hint once and fix the answer);
- running: the cells' own run time, from the execution timestamps that `make notebooks`
  stores in each cell (a CPU run, as committed).

The rates are the method's assumptions, stated in notebooks/INSTRUCTORS.md beside its results;
tests/test_notebook_policy.py checks that each notebook's header states a time within
TOLERANCE of this estimate.

    python tools/learner_time.py            # a table, one row per lesson notebook
"""

import json
import re
import sys
from datetime import datetime
from pathlib import Path

PROSE_WPM = 150
CODE_LINES_PER_MIN = 12
OUTPUT_LINES_PER_MIN = 30
FIGURE_MIN = 0.5
EXERCISE_MIN = 6
TOLERANCE = 0.25  # a stated time may be this share away from the estimate

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CHECKER_CALL = re.compile(r"^\s*check_\w+\(", re.M)


def _seconds(cell: dict) -> float:
    t = cell.get("metadata", {}).get("execution", {})
    if "iopub.execute_input" not in t or "shell.execute_reply" not in t:
        return 0.0
    start, end = (
        datetime.fromisoformat(t[k].replace("Z", "+00:00"))
        for k in ("iopub.execute_input", "shell.execute_reply")
    )
    return max((end - start).total_seconds(), 0.0)


def counts(path: Path) -> dict:
    """What the estimate is made of, counted in one notebook."""
    nb = json.loads(path.read_text())
    c = {"prose_words": 0, "code_lines": 0, "output_lines": 0, "figures": 0, "exercises": 0}
    c["run_s"] = 0.0
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            c["prose_words"] += len(src.split())
            continue
        if cell["cell_type"] != "code":
            continue
        c["code_lines"] += sum(1 for line in src.splitlines() if line.strip())
        c["exercises"] += len(CHECKER_CALL.findall(src))
        c["run_s"] += _seconds(cell)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data or "application/vnd.jupyter.widget-view+json" in data:
                c["figures"] += 1
            text = out.get("text") or ("" if "image/png" in data else data.get("text/plain", ""))
            c["output_lines"] += len("".join(text).splitlines())
    return c


def minutes(c: dict) -> float:
    """The estimate, in minutes, from counts()."""
    return (
        c["prose_words"] / PROSE_WPM
        + c["code_lines"] / CODE_LINES_PER_MIN
        + c["output_lines"] / OUTPUT_LINES_PER_MIN
        + c["figures"] * FIGURE_MIN
        + c["exercises"] * EXERCISE_MIN
        + c["run_s"] / 60
    )


def stated_minutes(path: Path) -> int | None:
    """The minutes a notebook's header states ('**Time:** about N minutes'), or None."""
    nb = json.loads(path.read_text())
    m = re.search(r"\*\*Time:\*\* about (\d+) minutes?", "".join(nb["cells"][0]["source"]))
    return int(m.group(1)) if m else None


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or lessons()
    keys = ("prose_words", "code_lines", "output_lines", "figures", "exercises", "run_s")
    print(f"{'notebook':32} " + " ".join(f"{k:>12}" for k in keys) + "  estimate  stated")
    total = 0.0
    for p in paths:
        c = counts(p)
        est = minutes(c)
        total += est
        cells = " ".join(f"{c[k]:>12.0f}" for k in keys)
        print(f"{p.stem[:32]:32} {cells}  {est:6.0f} min  {stated_minutes(p)}")
    print(f"total {total:.0f} min ({total / 60:.1f} h)")
