"""The book and its wing (CONTRIBUTING.md, "The rule"), read from the sources with ast.

- The book (tinyllm/*.py) never imports tinyllm.lab or tinyllm.course.
- The wing (tinyllm/lab/, tinyllm/course/) and the notebooks' code cells use only the book's
  public names:
  - no `_name` imported from a tinyllm module;
  - no `x._name` where `_name` is a private name the book defines (a function, class,
    method, module global or attribute of its own), or where x comes from tinyllm (imported
    from it, or assigned from an expression that starts with such a name, as in
    `decoder = GraphDecoder(...)` then `decoder._step`);
  - no assignment to a book module's globals, directly or through a mutating method
    (`graphs.COMPILE_SHAPES.update(...)`);
  - no assignment to the internals of the book's objects: `x.attr = ...` where attr is an
    attribute the book's classes set on themselves (`decoder.step_model = ...`), other than
    on `self` inside the wing's own classes.
  Dunders, and other packages' private names (`torch._dynamo`), are exempt.

Each finding names the file, the line and the name. The last tests show that the scan
catches each kind of breach, on a notebook written for the purpose.
"""

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tinyllm"
BOOK = sorted(PACKAGE.glob("*.py"))
WING = sorted((PACKAGE / "lab").rglob("*.py")) + sorted((PACKAGE / "course").rglob("*.py"))
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
BOOK_MODULES = {p.stem for p in BOOK if p.stem != "__init__"}
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault",
            "add", "discard", "sort", "reverse"}  # fmt: skip


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def book_names() -> tuple[set[str], set[str], dict[str, set[str]]]:
    """(private names the book defines, attributes its objects set on themselves,
    each book module's globals)."""
    privates, attributes, globals_ = set(), set(), {}
    for path in BOOK:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_globals = globals_.setdefault(path.stem, set())
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else ([node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            )
            module_globals.update(t.id for t in targets if isinstance(t, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if private(node.name):
                    privates.add(node.name)
            elif (
                isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and private(node.id)
            ):
                privates.add(node.id)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                (privates if private(node.attr) else attributes).add(node.attr)
    return privates, attributes, globals_


PRIVATE, ATTRIBUTES, GLOBALS = book_names()


def book_module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → book module, for `from tinyllm import generation [as g]` and
    `import tinyllm.generation as g`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "tinyllm":
            for a in node.names:
                if a.name in BOOK_MODULES:
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if (
                    parts[0] == "tinyllm"
                    and len(parts) == 2
                    and parts[1] in BOOK_MODULES
                    and a.asname
                ):
                    aliases[a.asname] = parts[1]
    return aliases


def from_tinyllm(tree: ast.AST) -> set[str]:
    """Names imported from tinyllm, and names assigned from an expression whose root is one
    of them (decoder = GraphDecoder(...); c = decoder.cache), to a fixed point."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyllm"):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(
                a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("tinyllm")
            )
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    while True:
        grown = {
            t.id
            for n in assigns
            if root_name(n.value) in names
            for t in ast.walk(ast.Tuple(n.targets))
            if isinstance(t, ast.Name)
        } - names
        if not grown:
            return names
        names |= grown


def root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def scope(code: str) -> tuple[dict[str, str], set[str]]:
    """(book module aliases, names from tinyllm) that code defines."""
    whole = ast.parse(code)
    return book_module_aliases(whole), from_tinyllm(whole)


def breaches(source: str, where: str, context: str = "", names=None) -> list[str]:
    """Every breach of the rule in one wing file or notebook cell, as 'where:line name'.
    context: the code that ran before (a notebook's other cells share its names); names:
    scope(context + source), when the caller has it already."""
    tree = ast.parse(source)
    modules, derived = scope(context + "\n" + source) if names is None else names
    found = []

    def note(node, what):
        found.append(f"{where}:{node.lineno} {what}")

    def module_global(node) -> str | None:
        """'generation.ATTENTION_BACKENDS' when node is a book module's global."""
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            return f"{modules[node.value.id]}.{node.attr}"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyllm"):
            for a in node.names:
                if private(a.name):
                    note(node, f"imports the private name {a.name} from {node.module}")
        elif (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and (node.attr in PRIVATE or root_name(node) in derived)
        ):
            note(node, f"reads the private name {node.attr} of a tinyllm object")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                inner = t.value if isinstance(t, ast.Subscript) else t
                name = module_global(inner)
                if name:
                    note(node, f"assigns to the book's global {name}")
                elif (
                    isinstance(t, ast.Attribute)
                    and t.attr in ATTRIBUTES
                    and root_name(t) not in ("self", "cls")
                ):
                    note(node, f"assigns to the book's internal attribute .{t.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and module_global(node.func.value)
        ):
            note(
                node,
                f"changes the book's global {module_global(node.func.value)} "
                f"with .{node.func.attr}()",
            )
    return found


def notebook_sources(path: Path):
    """(cell index, code without IPython magics) for every code cell."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            yield (
                i,
                "\n".join(
                    "" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()
                ),
            )


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def test_the_book_is_found():
    assert {"generation", "graphs", "kv_cache", "engine"} <= BOOK_MODULES
    assert {"ATTENTION_BACKENDS", "COURSE_COMPILE"} <= GLOBALS["precision"] | GLOBALS["graphs"]
    assert {"window", "step_model", "own_pool", "n", "pos"} <= ATTRIBUTES
    assert WING and NOTEBOOKS


@pytest.mark.parametrize("path", BOOK, ids=rel)
def test_the_book_never_imports_its_wing(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    wrong = [
        f"{rel(path)}:{n.lineno}"
        for n in ast.walk(tree)
        if (
            isinstance(n, ast.ImportFrom)
            and (n.module or "").startswith(("tinyllm.lab", "tinyllm.course"))
        )
        or (
            isinstance(n, ast.ImportFrom)
            and n.module == "tinyllm"
            and any(a.name in ("lab", "course") for a in n.names)
        )
        or (
            isinstance(n, ast.Import)
            and any(a.name.startswith(("tinyllm.lab", "tinyllm.course")) for a in n.names)
        )
    ]
    assert not wrong, f"the book imports its wing at {wrong}"


@pytest.mark.parametrize("path", WING, ids=rel)
def test_the_wing_uses_only_public_names(path):
    found = breaches(path.read_text(encoding="utf-8"), rel(path))
    assert not found, "\n".join(found)


def notebook_breaches(path: Path) -> list[str]:
    cells = list(notebook_sources(path))
    everything = "\n".join(src for _, src in cells)
    # every cell is in everything already: scope(everything + cell) is scope(everything), the
    # same aliases and names (sets, to a fixed point), so it is found once, not once a cell
    names = scope(everything)
    return [b for i, src in cells for b in breaches(src, f"{rel(path)} cell {i}", names=names)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=rel)
def test_notebooks_use_only_public_names(path):
    found = notebook_breaches(path)
    assert not found, "\n".join(found)


# --- the scan catches what it is about --------------------------------------------------------

BAD_CELLS = {  # a cell → what the scan must say about it
    "from tinyllm import GraphDecoder\ndecoder = GraphDecoder(model, 1)\ndecoder._step(tok)": (
        "reads the private name _step of a tinyllm object"
    ),
    "print(inspect.getsource(Engine._decode))": "reads the private name _decode",
    "from tinyllm import Engine\nengine = Engine(model, 4)\nlogits = engine._admit()": (
        "reads the private name _admit of a tinyllm object"
    ),
    "from tinyllm import graphs\ngraphs._Graphs": "reads the private name _Graphs",
    "model._init_weights(layer)": "reads the private name _init_weights",
    "from tinyllm.graphs import _Graphs": "imports the private name _Graphs",
    "from tinyllm import graphs\ngraphs.COMPILE_SHAPES.update(x)": (
        "changes the book's global graphs.COMPILE_SHAPES with .update()"
    ),
    "from tinyllm import precision as p\np.ATTENTION_BACKENDS = []": (
        "assigns to the book's global precision.ATTENTION_BACKENDS"
    ),
    "from tinyllm import graphs\ngraphs.COURSE_COMPILE['mode'] = 'max-autotune'": (
        "assigns to the book's global graphs.COURSE_COMPILE"
    ),
    "decoder.step_model = torch.compile(model)": (
        "assigns to the book's internal attribute .step_model"
    ),
    "decoder.cache.window = 32": "assigns to the book's internal attribute .window",
}


@pytest.mark.parametrize("cell", BAD_CELLS)
def test_a_notebook_that_breaks_the_rule_fails(cell, tmp_path):
    nb = {
        "cells": [
            {"cell_type": "code", "source": ["from tinyllm import Engine"]},
            {"cell_type": "code", "source": ["import torch\n", cell]},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "99_bad.ipynb"
    path.write_text(json.dumps(nb))
    found = notebook_breaches(path)
    assert len(found) == 1 and BAD_CELLS[cell] in found[0], found
    assert found[0].startswith("99_bad.ipynb cell 1:")  # the file, the cell, the line
    line = cell.count("\n") + 2  # the breach is on the cell's last line, after `import torch`
    assert found[0].startswith(f"99_bad.ipynb cell 1:{line} "), found
    with pytest.raises(AssertionError, match=rf"99_bad\.ipynb cell 1:{line} "):
        test_notebooks_use_only_public_names(path)  # the rule's own test fails on it


def test_public_names_and_other_packages_pass():
    ok = (
        "import torch\ntorch._dynamo.reset()\nfrom torch._dynamo.utils import counters\n"
        "decoder.step(tok, check=False)\nengine.admit()\nself.window = 3\nx.__class__\n"
        "from tinyllm import precision\nprint(precision.ATTENTION_BACKENDS)\n"
    )
    assert breaches(ok, "ok") == []
