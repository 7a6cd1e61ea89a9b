"""A learner's time through each notebook, estimated from the notebook itself and
calibrated on the times two first readings reported.

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

Those rates give a raw estimate; SCALE calibrates it against what learners reported. Two
learners new to the course worked through notebooks alone, exercises included, and each
reported about how many minutes every notebook took them: the first, notebooks 00-07 at
commit 65092a2; the second, notebooks 08 and 09 at commit 8468fd1. Those are estimates
from memory, not times taken with a clock. READINGS holds each report beside the raw
estimate of that notebook at that commit, and SCALE is the least-squares factor from the
one to the other (fit_scale; a test checks it). The estimate is SCALE × the raw one, so it
predicts what a first reading takes.

tests/test_notebook_policy.py checks that each notebook's header states a time within
TOLERANCE of this estimate, and a cells' run time that its committed outputs took.

    python tools/learner_time.py            # a table, one row per lesson notebook
    python tools/learner_time.py --write    # write each header's minutes and seconds
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

READINGS = {  # notebook → (minutes a learner reported, raw estimate then, the commit read)
    "00_setup": (30, 25.1, "65092a2"),
    "01_launch_bound_decode": (75, 54.4, "65092a2"),
    "02_static_shapes": (65, 47.9, "65092a2"),
    "03_buckets": (70, 52.9, "65092a2"),
    "04_capture_replay": (95, 70.1, "65092a2"),
    "05_bit_exactness": (45, 40.2, "65092a2"),
    "06_continuous_batching": (55, 46.1, "65092a2"),
    "07_graphs_and_torch_compile": (105, 81.2, "65092a2"),
    "08_paged_kv": (100, 69.1, "8468fd1"),
    "09_the_engine_around_the_graph": (100, 62.4, "8468fd1"),
}
SCALE = 1.36  # fit_scale(), rounded


def fit_scale(readings: dict = READINGS) -> float:
    """Least squares through the origin: reported ≈ scale × raw estimate."""
    pairs = [(m, e) for m, e, _ in readings.values()]
    return sum(m * e for m, e in pairs) / sum(e * e for _, e in pairs)


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


def raw_minutes(c: dict) -> float:
    """The estimate from counts() before calibration, in minutes."""
    return (
        c["prose_words"] / PROSE_WPM
        + c["code_lines"] / CODE_LINES_PER_MIN
        + c["output_lines"] / OUTPUT_LINES_PER_MIN
        + c["figures"] * FIGURE_MIN
        + c["exercises"] * EXERCISE_MIN
        + c["run_s"] / 60
    )


def minutes(c: dict) -> float:
    """The calibrated estimate, in minutes: what a first reading takes."""
    return SCALE * raw_minutes(c)


TIME_LINE = re.compile(
    r"\*\*Time:\*\* about (\d+) minutes to read and do the exercises; the cells ran in "
    r"(\d+) s on a 2-core CPU when these outputs were saved\."
)


def stated_seconds(path: Path) -> int | None:
    """The run time a notebook's header states, in seconds, or None."""
    nb = json.loads(path.read_text())
    m = TIME_LINE.search("".join(nb["cells"][0]["source"]).replace("\n", " "))
    return int(m.group(2)) if m else None


def write_header(path: Path) -> None:
    """Put the estimate and the committed run time into the notebook's header."""
    nb = json.loads(path.read_text())
    cell = nb["cells"][0]
    src = "".join(cell["source"])
    c = counts(path)
    new = (
        f"**Time:** about {round(minutes(c) / 5) * 5} minutes to read and do the exercises; "
        f"the cells ran in {max(1, round(c['run_s']))} s on a 2-core CPU when these outputs "
        f"were saved."
    )
    flat = src.replace("\n", " ")
    m = TIME_LINE.search(flat)
    if m is None:
        raise SystemExit(
            f"{path.name}: its header has no time line of the form {TIME_LINE.pattern}"
        )
    # rebuild the paragraph: the time sentence, then what followed it, wrapped at 95
    start = src.index("**Time:**")
    end = src.find("\n\n", start)
    end = len(src) if end < 0 else end
    rest = src[start:end].replace("\n", " ")[m.end() - flat.index("**Time:**") :].strip()
    words, lines, line = (new + (" " + rest if rest else "")).split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > 95:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    lines.append(line)
    src = src[:start] + "\n".join(lines) + src[end:]
    cell["source"] = src.splitlines(keepends=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def stated_minutes(path: Path) -> int | None:
    """The minutes a notebook's header states ('**Time:** about N minutes'), or None."""
    nb = json.loads(path.read_text())
    m = re.search(r"\*\*Time:\*\* about (\d+) minutes?", "".join(nb["cells"][0]["source"]))
    return int(m.group(1)) if m else None


def lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


if __name__ == "__main__":
    args = sys.argv[1:]
    write = "--write" in args
    paths = [Path(p) for p in args if p != "--write"] or lessons()
    if write:
        for p in paths:
            write_header(p)
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
