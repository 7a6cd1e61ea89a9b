"""requirements.txt and environment.yml must describe the same environment.

requirements.txt is the source of the exact pins (`make lab` and `make test` install it);
environment.yml gives conda users the same packages at the same versions through its
`pip:` list. A pin changed in one file and not the other fails here, naming the package.

PyYAML is not a course dependency, so environment.yml is read by a small line parser
that understands only the shape that file has: `- python=3.11`, `- pip`, and a `- pip:`
list of `- name==version` lines.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements.txt"
ENVIRONMENT = ROOT / "environment.yml"

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:;\s*(.+))?$")


def normalize(name):
    """PEP 503 name: `Foo_Bar` and `foo-bar` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pin(text, where):
    """`name==version` or `name==version; marker` -> (normalized name, version with its
    marker, if any); anything looser is an error."""
    m = PIN.match(text)
    if m is None:
        raise ValueError(f"{where}: {text!r} is not an exact pin 'name==version'")
    marker = f"; {m.group(3).strip()}" if m.group(3) else ""
    return normalize(m.group(1)), m.group(2) + marker


def add_pin(pins, name, version, where):
    if name in pins:
        raise ValueError(f"{where}: {name} is pinned twice")
    pins[name] = version


def read_requirements(path=REQUIREMENTS):
    pins = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            where = f"{path.name}:{n}"
            add_pin(pins, *parse_pin(line, where), where)
    return pins


def read_environment(path=ENVIRONMENT):
    """Returns (conda dependencies as {name: version or None}, pip pins as {name: version})."""
    conda, pip = {}, {}
    section, pip_indent = None, None
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        where = f"{path.name}:{n}"
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if indent == 0:
            section = item[:-1] if item.endswith(":") else None
            continue
        if section != "dependencies" or not item.startswith("- "):
            continue
        item = item[2:].strip()
        if pip_indent is not None and indent > pip_indent:
            if not item.startswith("-"):  # skip pip options such as `-e .`
                add_pin(pip, *parse_pin(item, where), where)
            continue
        pip_indent = None
        if item == "pip:":
            pip_indent = indent
        else:
            name, _, version = item.partition("=")
            add_pin(conda, normalize(name), version.lstrip("=") or None, where)
    return conda, pip


def differences(requirements, environment):
    """One line per package that is missing from a file or pinned differently."""
    lines = []
    for name in sorted(requirements.keys() | environment.keys()):
        req, env = requirements.get(name), environment.get(name)
        if env is None:
            lines.append(
                f"{name}: pinned in requirements.txt ({req}), missing from environment.yml"
            )
        elif req is None:
            lines.append(
                f"{name}: pinned in environment.yml ({env}), missing from requirements.txt"
            )
        elif req != env:
            lines.append(f"{name}: requirements.txt has {req}, environment.yml has {env}")
    return lines


def test_environment_yml_pins_what_requirements_txt_pins():
    requirements = read_requirements()
    conda, pip = read_environment()
    assert requirements, "requirements.txt pins nothing"
    assert "python" in conda and "pip" in conda, (
        "environment.yml must take python and pip from conda"
    )
    # A package that conda installs counts as well as one under pip:, with its version.
    both = {name: v for name, v in conda.items() if name not in ("python", "pip")}
    for name, version in pip.items():
        add_pin(both, name, version, "environment.yml")
    diff = differences(requirements, both)
    assert not diff, "requirements.txt and environment.yml differ:\n" + "\n".join(diff)


def test_pins_satisfy_pyproject():
    """Each dependency of pyproject.toml (and of its extras) is pinned, within its bounds."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        wanted += extra
    pins = read_requirements()
    problems = []
    for spec in map(Requirement, wanted):
        name = normalize(spec.name)
        if name not in pins:
            problems.append(
                f"{name}: a dependency in pyproject.toml, not pinned in requirements.txt"
            )
        elif not spec.specifier.contains(pins[name].split(";")[0], prereleases=True):
            problems.append(f"{name}: pinned {pins[name]}, pyproject.toml asks {spec.specifier}")
    assert not problems, "\n".join(problems)
