"""The notebooks' house rules, read from the committed .ipynb files (nothing is executed).

- Every lesson notebook (notebooks/*.ipynb) states what you will learn, has exercises (a
  cell that calls a `check_...` function) and a recap. Every notebook, solutions included,
  marks at most a quarter of its code cells NBVAL_IGNORE_OUTPUT or NBVAL_SKIP: those markers
  are for timing and widget cells, and a notebook that needs more of them has stopped being
  checked by nbval.
- Every numbered notebook has a solutions twin in notebooks/solutions/, and every solutions
  notebook a lesson twin.
- A solutions notebook solves every exercise of its lesson: each checker it calls, and each
  checker of the lesson's exercise cells, printed [OK] in the committed outputs (a GPU-only
  bonus may instead say that it needs CUDA, as it does on the CPU that ran them). A solution
  may also show a tempting wrong answer and the checker's hint for it.
- No committed output is a traceback: an unsolved exercise prints a hint.
- A notebook that runs the CPU graph simulator (tinyllm.lab.simgraph, or a decoder or `api`
  that may be it) says once, by its first such cell, what the simulator does not model: no
  launch is saved, its timings mean nothing, there are no streams, and pools are not shared.
- No notebook defines a function or class under a name that tinyllm already uses: a notebook
  shows the package's code and calls it, it never keeps a second copy. Exercise stubs and
  solutions are named `my_...`, and so is anything defined inside them.
- Every numbered notebook's header states a learner's time ("**Time:** about N minutes")
  within tools/learner_time.py's tolerance of that tool's calibrated estimate, and the run
  time its committed outputs took; notebooks/INSTRUCTORS.md lists the same times.
"""

import ast
import functools
import importlib.util
import inspect
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = NOTEBOOKS / "solutions"
PACKAGE = ROOT / "tinyllm"

LESSONS = sorted(NOTEBOOKS.glob("*.ipynb"))
SOLVED = sorted(SOLUTIONS.glob("*.ipynb"))
NUMBERED = [p for p in LESSONS if re.match(r"\d\d_", p.name)]
EVERY = LESSONS + SOLVED

MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")
MARKER_TAGS = ("nbval-ignore-output", "nbval-skip")
CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(")
GPU_SKIP = "needs CUDA"


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def markdown(nb: dict) -> str:
    return "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")


def output_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(source({"source": out.get("text", "")}))
        elif out["output_type"] == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
        else:
            parts.append(source({"source": out.get("data", {}).get("text/plain", "")}))
    return "\n".join(parts)


def is_marked(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return any(m in source(cell) for m in MARKERS) or any(t in tags for t in MARKER_TAGS)


def ids(paths):
    return [str(p.relative_to(NOTEBOOKS)) for p in paths]


# --- lesson notebooks ---------------------------------------------------------------------


@pytest.mark.parametrize("path", EVERY, ids=ids(EVERY))
def test_at_most_a_quarter_of_code_cells_are_unchecked(path):
    cells = code_cells(load(path))
    marked = [c.get("id", "?") for c in cells if is_marked(c)]
    assert 4 * len(marked) <= len(cells), (
        f"{path.name}: {len(marked)} of {len(cells)} code cells carry NBVAL_IGNORE_OUTPUT or "
        f"NBVAL_SKIP ({marked}); at most a quarter may: keep the markers for timing and widget "
        f"cells, print the rest rounded"
    )


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_lesson_has_goals_exercises_and_recap(path):
    nb = load(path)
    text = markdown(nb)
    assert "What you will learn" in text, f"{path.name} does not say what you will learn"
    assert re.search(r"^#+\s*Recap\b", text, re.M), f"{path.name} has no Recap heading"
    calls = [m for c in code_cells(nb) for m in CHECK_CALL.findall(source(c))]
    assert calls, f"{path.name} has no exercise: no cell calls a check_... function"


# --- solutions ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", NUMBERED, ids=ids(NUMBERED))
def test_numbered_notebook_has_solutions_twin(path):
    twin = SOLUTIONS / f"{path.stem}_solutions.ipynb"
    assert twin.exists(), f"{path.name} has no solutions notebook notebooks/solutions/{twin.name}"


@pytest.mark.parametrize("path", SOLVED, ids=ids(SOLVED))
def test_solutions_notebook_has_lesson_twin(path):
    assert path.stem.endswith("_solutions"), f"{path.name}: name it <lesson>_solutions.ipynb"
    lesson = NOTEBOOKS / f"{path.stem.removesuffix('_solutions')}.ipynb"
    assert lesson.exists(), f"{path.name} solves {lesson.name}, which does not exist"


def gpu_only(checker: str) -> bool:
    """A GPU bonus checker says so in its docstring ("GPU bonus. ...")."""
    from tinyllm.course import exercises

    fn = getattr(exercises, checker, None)
    return fn is not None and (inspect.getdoc(fn) or "").startswith("GPU bonus")


def exercise_checkers(nb: dict) -> set[str]:
    """Checkers called in a lesson's exercise cells: those holding a stub to fill in."""
    return {
        name
        for c in code_cells(nb)
        if "answer = None" in source(c) or "NotImplementedError" in source(c)
        for name in CHECK_CALL.findall(source(c))
    }


def solved_checkers(path: Path) -> set[str]:
    """Checkers whose call printed [OK] (or, for a GPU bonus, that it needs CUDA), read from
    the committed outputs. A cell may also show a wrong answer on purpose: its checker then
    prints a hint, which is fine, but it does not count as solved."""
    solved = set()
    for cell in code_cells(load(path)):
        calls = CHECK_CALL.findall(source(cell))
        out = output_text(cell)
        skipped = sum(gpu_only(c) for c in calls) if GPU_SKIP in out else 0
        if calls and out.count("[OK]") + skipped >= len(calls):
            solved.update(calls)
    return solved


@pytest.mark.parametrize("path", SOLVED, ids=ids(SOLVED))
def test_every_solved_checker_printed_ok(path):
    """Every exercise of the lesson is solved in its twin: its checker printed [OK]."""
    lesson = NOTEBOOKS / f"{path.stem.removesuffix('_solutions')}.ipynb"
    wanted = exercise_checkers(load(lesson)) if lesson.exists() else set()
    called = {name for c in code_cells(load(path)) for name in CHECK_CALL.findall(source(c))}
    assert called, f"{path.name} calls no checker"
    unsolved = sorted((wanted | called) - solved_checkers(path))
    assert not unsolved, (
        f"{path.name}: no call of {unsolved} printed [OK] in the committed outputs "
        f"(run `make notebooks` after fixing the solution)"
    )


@pytest.mark.parametrize("path", EVERY, ids=ids(EVERY))
def test_no_committed_tracebacks(path):
    """An unsolved exercise prints a hint, and a solved one [OK]: never a traceback."""
    errors = [
        f"cell {c.get('id', '?')}: {o.get('ename')}: {o.get('evalue')}"
        for c in code_cells(load(path))
        for o in c.get("outputs", [])
        if o["output_type"] == "error"
    ]
    assert not errors, f"{path.name} has committed errors: {errors}"


# --- the CPU graph simulator says what it is not -------------------------------------------

SIMULATOR = re.compile(r"\bsimgraph\b|\bapi\.\w|graph_api=api\b")
NOT_MODELLED = ("no launch is saved", "timings mean nothing", "no streams", "pools are not shared")


def simulator_caveats_missing(nb: dict) -> list[str]:
    """What a notebook that runs the simulator has not said, by its first simulator cell
    (in the markdown or the outputs up to it), of what the simulator does not model."""
    cells = nb["cells"]
    first = next((i for i, c in enumerate(cells)
                  if c["cell_type"] == "code" and SIMULATOR.search(source(c))), None)  # fmt: skip
    if first is None:
        return []
    text = "\n".join(
        source(c) if c["cell_type"] == "markdown" else output_text(c) for c in cells[: first + 1]
    )
    said = " ".join(text.replace("*", "").lower().split())
    return [phrase for phrase in NOT_MODELLED if phrase not in said]


@pytest.mark.parametrize("path", EVERY, ids=ids(EVERY))
def test_a_notebook_that_runs_the_simulator_says_once_what_it_does_not_model(path):
    missing = simulator_caveats_missing(load(path))
    assert not missing, (
        f"{path.name}: by its first cell that may run tinyllm.lab.simgraph it has not said "
        f"{missing}: say once, before or in that cell, what the simulator does not model"
    )


def test_a_notebook_without_the_caveats_is_found():
    caveat = {"cell_type": "markdown", "source": "No launch is saved, its *timings mean\nnothing*, "
              "there are no streams, and pools are not shared."}  # fmt: skip
    cell = {"cell_type": "code", "source": "g = api.CUDAGraph()", "outputs": []}
    assert simulator_caveats_missing({"cells": [caveat, cell, cell]}) == []
    assert "no launch is saved" in simulator_caveats_missing({"cells": [cell, caveat]})
    assert simulator_caveats_missing({"cells": [caveat]}) == []  # no simulator: nothing to say


# --- no second copy of package code ---------------------------------------------------------


@functools.cache
def package_names() -> frozenset[str]:
    """Every function, method and class name defined anywhere in tinyllm (dunders aside).
    Parsed once: every notebook's test reads the same names."""
    names = set()
    for py in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not (node.name.startswith("__") and node.name.endswith("__")):
                    names.add(node.name)
    return frozenset(names)


def defined_names(tree: ast.AST, inside_mine: bool = False):
    """(name, inside a my_... definition) for every def and class in tree."""
    for node in ast.iter_child_nodes(tree):
        mine = inside_mine
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, inside_mine
            mine = inside_mine or node.name.startswith("my_")
        yield from defined_names(node, mine)


def python_source(cell: dict) -> str:
    """A code cell without IPython's line magics and shell escapes."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source(cell).splitlines()
    )


def test_package_names_are_found():
    names = package_names()
    assert {"GraphDecoder", "capture_graph", "bucket_for", "Engine", "timeline_figure"} <= names


@pytest.mark.parametrize("path", EVERY, ids=ids(EVERY))
def test_no_notebook_redefines_package_code(path):
    taken = package_names()
    clashes = []
    for cell in code_cells(load(path)):
        tree = ast.parse(python_source(cell))
        for name, inside_mine in defined_names(tree):
            if name in taken and not name.startswith("my_") and not inside_mine:
                clashes.append(f"{name} (cell {cell.get('id', '?')})")
    assert not clashes, (
        f"{path.name} defines {clashes}, names tinyllm already uses: show the package's code "
        f"with inspect.getsource and call it; name exercise functions my_..."
    )


def _learner_time():
    spec = importlib.util.spec_from_file_location("learner_time", ROOT / "tools/learner_time.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", NUMBERED, ids=lambda p: p.name)
def test_stated_learner_time_matches_the_estimate(path):
    """The header's minutes are the calibrated estimate's (within TOLERANCE) and the table's;
    its seconds are what its committed outputs took to run, within a factor of two."""
    lt = _learner_time()
    c = lt.counts(path)
    stated, est = lt.stated_minutes(path), lt.minutes(c)
    assert stated is not None, f"{path.name}: no '**Time:** about N minutes' in its first cell"
    assert abs(stated - est) <= lt.TOLERANCE * est, (
        f"{path.name} states {stated} minutes, tools/learner_time.py estimates {est:.0f}: "
        "run python tools/learner_time.py --write and update notebooks/INSTRUCTORS.md"
    )
    row = re.search(rf"\| `{path.stem}` \| (\d+) min", (NOTEBOOKS / "INSTRUCTORS.md").read_text())
    assert row and int(row.group(1)) == stated, f"INSTRUCTORS.md's time for {path.stem}"
    seconds = lt.stated_seconds(path)
    assert seconds is not None, f"{path.name}: its header states no run time ({lt.TIME_LINE})"
    assert c["run_s"] / 2 <= seconds <= 2 * max(c["run_s"], 1), (
        f"{path.name} says its cells ran in {seconds} s, its outputs took {c['run_s']:.0f} s"
    )


def test_the_calibration_is_the_fit_of_the_readings():
    """SCALE is the least-squares factor of the learners' reported times, each report is of
    a numbered notebook, and the estimate of each then lies within TOLERANCE of the report. A
    notebook no learner has reported on yet is stated at the calibrated estimate alone."""
    lt = _learner_time()
    assert lt.SCALE == round(lt.fit_scale(), 2)
    assert set(lt.READINGS) <= {p.stem for p in NUMBERED}
    for name, (reported, raw, _) in lt.READINGS.items():
        assert abs(lt.SCALE * raw - reported) <= lt.TOLERANCE * reported, name


def test_learner_time_counts_what_a_learner_does():
    lt = _learner_time()
    base = {"prose_words": 0, "code_lines": 0, "output_lines": 0, "figures": 0, "exercises": 0}
    assert lt.raw_minutes({**base, "run_s": 0.0}) == 0
    assert lt.raw_minutes({**base, "prose_words": lt.PROSE_WPM, "run_s": 0.0}) == 1
    assert lt.raw_minutes({**base, "exercises": 2, "run_s": 60.0}) == 2 * lt.EXERCISE_MIN + 1
    assert lt.minutes({**base, "exercises": 2, "run_s": 60.0}) == lt.SCALE * (
        2 * lt.EXERCISE_MIN + 1
    )
