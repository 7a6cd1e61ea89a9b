"""Draw the README's figures from results/: python -m tinyllm.course.images (make images).

Every image in images/ except the browser screenshots comes from here, so each one can be
redrawn from the recorded data (or, for masks and buckets, from the package itself). The
pictures of the mechanism (mech_*.png) are drawn from the book's objects run on the CPU
(a static cache, a real Engine) and, for their sizes, from the same recording.
"""

import argparse
from pathlib import Path

from tinyllm.course.viz import (
    bucket_figure,
    buckets_figure,
    cost_model_figure,
    diet_figure,
    launch_costs,
    launches_figure,
    mask_figure,
    peers_figure,
    pool_figure,
    slots_figure,
    static_cache_figure,
    step_time_figure,
    timeline_figure,
)
from tinyllm.graphs import default_buckets
from tinyllm.kv_cache import window_mask
from tinyllm.lab.results import load_diet, load_results, load_trace

IMAGES = Path(__file__).resolve().parents[2] / "images"


def draw(out: Path = IMAGES, gpu: str = "h200") -> list[Path]:
    res = load_results(gpu)
    if res is None:
        raise SystemExit(f"no results/{gpu}.json: run python -m tinyllm.lab.bench on a GPU first")
    diet = load_diet(gpu)
    pads = [0, 3, 5]
    figures = {
        "timeline.png": timeline_figure(load_trace(res), batch=1),
        "step_time.png": step_time_figure(res),
        "mask.png": mask_figure(
            window_mask(9, 16, pads),
            pos=9,
            first_valid=pads,
            title="Decode at position 9 over a fixed 16-key window",
        ),
        "buckets.png": bucket_figure(default_buckets(1024), 1024),
        "peers.png": peers_figure(res),
        "cost_model.png": cost_model_figure(res, diet),
        "diet.png": diet_figure(diet),
        "mech_launches.png": launches_figure(launch_costs(res)),
        "mech_static_cache.png": static_cache_figure(),
        "mech_buckets.png": buckets_figure(1024),
        "mech_pool.png": pool_figure(res),
        "mech_slots.png": slots_figure(),
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110, metadata={"Software": None})
        paths.append(out / name)
    return paths


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, default=IMAGES)
    p.add_argument("--gpu", default="h200", help="which results/<gpu>.json to draw")
    args = p.parse_args()
    for path in draw(args.out, args.gpu):
        print(f"wrote {path}")
