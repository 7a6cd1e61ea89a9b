"""The capture-size presets measured on a GPU (lab.capture_policy): into OUT.json with the
bench's provenance, through the module's own CLI function.

    PYTHONPATH=<copy> python3 results/probes/capture_policy.py OUT.json
"""

import json
import sys

from tinyllm.lab import capture_policy

res = capture_policy.main([sys.argv[1]])
for name, row in res["padding"]["presets"].items():
    print(name, row["capture_sizes"], "waste", row["waste_share"])
for name, row in res["measured"]["presets"].items():
    keep = (
        "graphs",
        "largest_first_capture_s",
        "smallest_first_capture_s",
        "shared_pool_bytes",
        "smallest_first_pool_bytes",
        "linear_estimate_bytes",
        "vllm_profiler_estimate_bytes",
    )
    print(name, json.dumps({k: row[k] for k in keep}))
