"""Checkers for the notebooks' exercises, one module per notebook (nb00 ... nb11) on a
shared harness.

Each checker compares the learner's answer with what the package really does, on edge
cases and random ones. It prints "[OK] ..." or one "[HINT] ..." naming the input it failed
on, and returns a harness.Verdict, true for [OK], which a notebook does not echo: a stub that
still raises NotImplementedError, a crash, a wrong type or a wrong value all give a hint,
never a traceback. A GPU-only bonus (none is left: notebook 04 checks capture and replay on
a CPU with tinyllm.lab.simgraph) would return None without CUDA.
"""

from tinyllm.course.exercises.nb00 import check_param_split, check_token_count
from tinyllm.course.exercises.nb01 import (
    check_bandwidth_floor,
    check_launch_bound,
    check_static_extra_ops,
)
from tinyllm.course.exercises.nb02 import check_static_write, check_window_mask
from tinyllm.course.exercises.nb03 import (
    check_bucket_choice,
    check_bucket_for,
    check_default_buckets,
    check_wasted_share,
)
from tinyllm.course.exercises.nb04 import (
    POOL_CHOICES,
    STALE_READS,
    check_capture_replay,
    check_pool_choice,
    check_stale_reads,
)
from tinyllm.course.exercises.nb05 import check_first_difference, check_flip_margin
from tinyllm.course.exercises.nb06 import check_admission, check_slot_mask
from tinyllm.course.exercises.nb07 import (
    check_compile_count,
    check_compile_prediction,
    check_predicted_us,
)
from tinyllm.course.exercises.nb08 import (
    check_block_of,
    check_blocks_for,
    check_paged_write,
    check_replay_loop,
)
from tinyllm.course.exercises.nb09 import check_hand_out, check_noise_key, check_step_sampling
from tinyllm.course.exercises.nb10 import check_admit_count, check_flush_span, check_gain_shown
from tinyllm.course.exercises.nb11 import (
    check_combiner,
    check_form,
    check_idle_share,
    check_kernels_to_remove,
)

__all__ = [
    "check_token_count",
    "check_param_split",
    "check_bandwidth_floor",
    "check_static_extra_ops",
    "check_launch_bound",
    "check_window_mask",
    "check_static_write",
    "check_bucket_for",
    "check_default_buckets",
    "check_wasted_share",
    "check_bucket_choice",
    "check_stale_reads",
    "check_pool_choice",
    "check_capture_replay",
    "STALE_READS",
    "POOL_CHOICES",
    "check_first_difference",
    "check_flip_margin",
    "check_admission",
    "check_slot_mask",
    "check_compile_count",
    "check_compile_prediction",
    "check_predicted_us",
    "check_block_of",
    "check_blocks_for",
    "check_paged_write",
    "check_replay_loop",
    "check_step_sampling",
    "check_hand_out",
    "check_noise_key",
    "check_flush_span",
    "check_admit_count",
    "check_gain_shown",
    "check_idle_share",
    "check_kernels_to_remove",
    "check_combiner",
    "check_form",
]
