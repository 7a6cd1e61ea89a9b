"""Figures for the notebooks: one message per figure, drawn from data a test can check.

Every function returns a matplotlib Figure and never calls plt.show(). Each figure is
closed to pyplot as soon as it is made: a notebook cell that ends with the call shows it
once, and a loop or a widget that draws many leaks none. Titles state the message, and
any claim in a title is computed from the data it is drawn from.

The arithmetic the figures draw (masks, bucket windows, wasted work) is the book's own
(tinyllm.kv_cache.window_mask and slot_mask, tinyllm.graphs.bucket_windows, wasted_share
and shapes.bucket_tradeoff), so a picture of a mask is the mask the decoder uses.

- style: colours, labels, units (every figure);
- shapes: masks and buckets (notebooks 02, 03, 06);
- timing: recorded GPU timings and traces, and the floor of a graph node (01, 04, 07, 11);
- serving: logit differences, the engine's slots, training loss (00, 05, 06);
- costs: the peers, the cost model, the kernel diet, position sweeps, reduce-overhead's
  host time, and the two paths to replayed compiled kernels (01, 07), what a larger window
  costs (03);
- mechanism: pictures of the mechanism (a step's launches, the static cache, buckets, the
  pool, the slots), drawn from what scenes computes with the book's own objects;
- pages: the paged cache's block table and pool, and the paged section's recordings (08);
- engine: where a graphed engine's time goes, its recorded host and GPU lanes, a model of
  its late-read turns, the capture presets, and the live counts beside them (09).

A figure drawn from a recording carries its provenance label as a footnote
(style.label_source); data without a provenance block gets none.
"""

from tinyllm.course.viz.costs import (
    breakdown_figure,
    compile_paths_figure,
    cost_model_figure,
    diet_figure,
    peers_figure,
    sweep_figure,
    sweep_wins,
    window_costs,
    window_times_figure,
)
from tinyllm.course.viz.engine import (
    SECTION_COLORS,
    busy_us,
    capture_policy_figure,
    count_ops,
    each_change_cuts_the_largest,
    engine_variants,
    late_read_figure,
    late_read_schedule,
    overlap_timeline_figure,
    prefill_forwards,
    preset_table,
    recorded_groups,
    sections_figure,
    timeline_window,
)
from tinyllm.course.viz.mechanism import (
    buckets_figure,
    launches_figure,
    pool_figure,
    slots_figure,
    static_cache_figure,
)
from tinyllm.course.viz.pages import (
    attention_figure,
    paged_sweep_figure,
    pages_figure,
    pages_scene,
    short_rows_figure,
    splits_figure,
    tensor_cores_figure,
)
from tinyllm.course.viz.scenes import engine_slots_run, launch_costs, static_cache_step
from tinyllm.course.viz.serving import (
    engine_figure,
    logit_diff_figure,
    loss_figure,
    slot_segments,
    slot_timeline_figure,
)
from tinyllm.course.viz.shapes import (
    bucket_figure,
    bucket_tradeoff,
    bucket_tradeoff_figure,
    mask_figure,
)
from tinyllm.course.viz.style import (
    COLORS,
    LABELS,
    MIB,
    CourseFigure,
    footnote_text,
    label_source,
    new_figure,
    sig3,
)
from tinyllm.course.viz.timing import (
    MIN_BAR_SHARE,
    capture_figure,
    cpu_gpu_figure,
    floor_figure,
    floor_times,
    gpu_idle_share,
    is_kernel,
    kernels_figure,
    node_floor_figure,
    step_time_figure,
    timeline_figure,
)

__all__ = [
    "breakdown_figure", "compile_paths_figure", "cost_model_figure", "diet_figure",
    "peers_figure", "sweep_figure", "sweep_wins", "window_costs", "window_times_figure",
    "COLORS", "LABELS", "MIB", "MIN_BAR_SHARE", "CourseFigure", "bucket_figure",
    "bucket_tradeoff", "bucket_tradeoff_figure", "buckets_figure", "capture_figure",
    "cpu_gpu_figure",
    "engine_figure", "engine_slots_run", "floor_figure", "floor_times", "footnote_text",
    "gpu_idle_share", "is_kernel", "kernels_figure", "label_source", "launch_costs",
    "node_floor_figure",
    "launches_figure", "logit_diff_figure", "loss_figure", "mask_figure", "new_figure",
    "pool_figure", "sig3", "slot_segments", "slot_timeline_figure", "slots_figure",
    "static_cache_figure", "static_cache_step", "step_time_figure", "timeline_figure",
    "attention_figure", "pages_figure", "pages_scene", "paged_sweep_figure", "splits_figure",
    "short_rows_figure", "tensor_cores_figure",
    "SECTION_COLORS", "busy_us", "capture_policy_figure", "count_ops",
    "each_change_cuts_the_largest", "engine_variants", "late_read_figure", "late_read_schedule",
    "overlap_timeline_figure", "prefill_forwards", "preset_table", "recorded_groups",
    "sections_figure", "timeline_window",
]  # fmt: skip
