"""The look shared by every figure: one colour per meaning, units, 3 significant figures, and
figures that render in Jupyter without leaking into pyplot."""

import io

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from tinyllm.lab.results import provenance_label

COLORS = {
    "eager": "#D55E00",  # vermillion
    "static": "#E69F00",  # orange
    "graph": "#0072B2",  # blue
    "compiled": "#CC79A7",  # reddish purple
    "fused": "#009E73",  # bluish green
    "attended": "#56B4E9",  # sky blue: a key the query attends to
    "masked": "#D9D9D9",  # light grey: a key past the position, masked
    "pad": "#F0E442",  # yellow: a left-pad key, masked
    "current": "#000000",  # black: the position being decoded
    "wasted": "#999999",  # grey: work spent on masked keys
    "train": "#999999",  # training loss: grey, the validation loss is what matters
    "val": "#000000",
    "requests": ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"),
}
LABELS = {
    "eager": "eager (dynamic KVCache)",
    "static": "static step, run eagerly",
    "graph": "graph replay",
}
MIB = 2**20


def sig3(x: float) -> str:
    """x to 3 significant figures, without an exponent below 1e6: 1400, 13, 0.0512."""
    return f"{float(f'{x:.3g}'):g}"


class CourseFigure(Figure):
    """A Figure that renders itself as a PNG in Jupyter, with or without pyplot's inline
    backend (that backend registers its own PNG formatter only after the first cell that
    draws a figure has finished)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png")
        return buf.getvalue()


def new_figure(nrows: int = 1, ncols: int = 1, **kw):
    fig, axes = plt.subplots(nrows, ncols, layout="constrained", FigureClass=CourseFigure, **kw)
    plt.close(fig)  # pyplot forgets it: shown once as a cell's value, never leaked
    return fig, axes


def batch_index(table: dict, batch: int) -> int:
    if batch not in table["batch"]:
        raise ValueError(f"batch {batch} was not recorded; recorded batches: {table['batch']}")
    return table["batch"].index(batch)


# --- footnotes: where the data comes from, and what the drawing changed ------------------

FOOTNOTE_SIZE = 7  # points


def footnote(fig: Figure, *lines: str) -> None:
    """Write lines of small print under the figure, after making room for them: the
    constrained layout keeps every axes above them. The figure's size does not change."""
    lines = [ln for ln in lines if ln]
    if not lines:
        return
    text = "\n".join(lines)
    height = (1.35 * FOOTNOTE_SIZE * len(text.splitlines()) + 6) / (72 * fig.get_figheight())
    fig.get_layout_engine().set(rect=(0, height, 1, 1 - height))
    style = {"fontsize": FOOTNOTE_SIZE, "color": "0.35", "ha": "left", "va": "bottom"}
    fig.text(0.005, 0.005, text, gid="footnote", **style)


def provenance_note(data: dict | None) -> str | None:
    """tinyllm.lab.results.provenance_label(data) when data carries a provenance block
    (a recording, or its trace), else None: nothing is invented for unlabelled data. A
    recording made of stages, each run at a commit of its own (the kernel diet,
    results/<gpu>_diet.json), names the stages' dates and commits instead of one."""
    if not isinstance(data, dict) or not data.get("provenance"):
        return None
    p = data["provenance"]
    stages = [s for s in data.get("stages", ()) if isinstance(s, dict) and s.get("commit")]
    if p.get("commit") or not stages:
        return provenance_label(data)
    dates = sorted({str(s.get("date", p.get("date", "undated"))) for s in stages})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    commits = ", ".join(f"{s.get('stage', '?')} {str(s['commit'])[:7]}" for s in stages)
    return (
        f"recorded on {p.get('gpu', 'an unknown GPU')}, torch {p.get('torch', '?')}, {when},\n"
        f"each stage at its own commit: {commits}"
    )


def label_source(fig: Figure, data: dict | None, *notes: str) -> Figure:
    """The footnote of every figure drawn from a recording: its provenance label (when the
    data has one), then any notes on how it is drawn. Returns fig."""
    footnote(fig, provenance_note(data), *notes)
    return fig


def footnote_text(fig: Figure) -> str:
    """The footnote label_source wrote on fig ("" when none)."""
    return next((t.get_text() for t in fig.texts if t.get_gid() == "footnote"), "")
