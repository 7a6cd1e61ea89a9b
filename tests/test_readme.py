"""Recorded numbers are guarded: the README's H200 section is what results/h200.json says
(written by `make images`), and no recorded figure is typed by hand in prose (README,
INSTRUCTORS.md, the notebooks' markdown): a changed recording must show, or fail a test."""

import json
import re
from pathlib import Path

import pytest

from tinyllm.course.readme import BEGIN, END, README, h200_section
from tinyllm.lab.results import (
    load_busy_events,
    load_diet,
    load_engine,
    load_engine_scale,
    load_hf,
    load_paged,
    load_results,
)

ROOT = Path(__file__).resolve().parent.parent
# a measured-looking figure: a number with a unit of time, memory, rate or speed-up, or a
# count of kernels
FIGURE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:µs|us|ms|MiB|GiB|MB|GB/s|tokens/s|tok/s|×|x faster|"
    r"kernels)\b|(?<![\w.])\d[\d,]*(?:\.\d+)?×"
)
ALLOWED = {"1 µs", "1 s", "1 GB/s", "2 MiB", "285 MB"}  # units being defined, the allocator's
# segment size (a constant of PyTorch's source, cited where it is used) and the size of
# Triton 3.9.0's Linux wheel (285,777,556 bytes as pip downloads it): not measurements


def test_the_readme_section_is_the_recording():
    text = README.read_text()
    section = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    recorded = (load_results(), load_diet(), load_paged(), load_engine(), load_busy_events(),
                load_engine_scale(), load_hf())  # fmt: skip
    assert section == h200_section(*recorded), (
        "README's H200 section differs from results/: run `make images`"
    )


def prose_files():
    text = README.read_text()
    outside = text[: text.index(BEGIN)] + text[text.index(END) :]
    yield "README.md", outside
    yield "notebooks/INSTRUCTORS.md", (ROOT / "notebooks" / "INSTRUCTORS.md").read_text()
    for nb in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        md = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        yield str(nb.relative_to(ROOT)), md


PROSE = list(prose_files())


@pytest.mark.parametrize("name, text", PROSE, ids=[name for name, _ in PROSE])  # fmt: skip
def test_no_recorded_figure_is_typed_in_prose(name, text):
    found = [m.group(0) for m in FIGURE.finditer(text) if m.group(0).strip() not in ALLOWED]
    assert not found, (
        f"{name} types figures by hand: {found[:8]}; print them from the recording in a "
        f"cell (or, in the README, let `make images` write them)"
    )
