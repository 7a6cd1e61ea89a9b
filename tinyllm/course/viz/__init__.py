"""Figures for the notebooks: one message per figure, drawn from data a test can check.

Every function returns a matplotlib Figure and never calls plt.show(). Each figure is
closed to pyplot as soon as it is made: a notebook cell that ends with the call shows it
once, and a loop or a widget that draws many leaks none. Titles state the message, and
any claim in a title is computed from the data it is drawn from.

The arithmetic the figures draw (masks, bucket windows, wasted work) is the book's own
(tinyllm.kv_cache.window_mask and slot_mask, tinyllm.graphs.bucket_windows, wasted_share
and bucket_tradeoff), so a picture of a mask is the mask the decoder uses.

- style: colours, labels, units (every figure);
- shapes: masks and buckets (notebooks 02, 03, 06);
- timing: recorded GPU timings and traces (01, 04, 07);
- serving: logit differences, the engine's slots, training loss (00, 05, 06);
- costs: the peers, the cost model, the kernel diet, position sweeps (01, 07), what a
  larger window costs (03).
"""

from tinyllm.course.viz.costs import (
    breakdown_figure,
    cost_model_figure,
    diet_figure,
    peers_figure,
    sweep_figure,
    window_costs,
    window_times_figure,
)
from tinyllm.course.viz.serving import (
    engine_figure,
    logit_diff_figure,
    loss_figure,
    slot_segments,
    slot_timeline_figure,
)
from tinyllm.course.viz.shapes import bucket_figure, bucket_tradeoff_figure, mask_figure
from tinyllm.course.viz.style import COLORS, LABELS, MIB, CourseFigure, new_figure, sig3
from tinyllm.course.viz.timing import (
    capture_figure,
    cpu_gpu_figure,
    floor_figure,
    floor_times,
    fusion_figure,
    gpu_idle_share,
    kernels_figure,
    step_time_figure,
    timeline_figure,
)

__all__ = [
    "breakdown_figure", "cost_model_figure", "diet_figure", "peers_figure", "sweep_figure",
    "window_costs", "window_times_figure",
    "COLORS", "LABELS", "MIB", "CourseFigure", "bucket_figure", "bucket_tradeoff_figure",
    "capture_figure", "cpu_gpu_figure", "engine_figure", "floor_figure", "floor_times",
    "fusion_figure", "gpu_idle_share", "kernels_figure", "logit_diff_figure", "loss_figure",
    "mask_figure", "new_figure", "sig3", "slot_segments", "slot_timeline_figure",
    "step_time_figure", "timeline_figure",
]  # fmt: skip
