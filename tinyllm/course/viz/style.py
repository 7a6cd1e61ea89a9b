"""The look shared by every figure: one colour per meaning, units, 3 significant figures, and
figures that render in Jupyter without leaking into pyplot."""

import io

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

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
