"""The floor of a graph node (lab.floor): the line fitted through replay times, and on a GPU
the graphs of K kernels themselves."""

import pytest

from tinyllm.lab import floor
from tinyllm.lab.results import load_floor


def test_fit_recovers_a_line_and_its_fixed_cost():
    got = floor.fit([10, 50, 100, 200], [3.0 + 0.5 * k for k in (10, 50, 100, 200)])
    assert got == {"us_per_node": 0.5, "fixed_us": 3.0}


def test_fit_of_a_noisy_line_is_its_least_squares_line():
    got = floor.fit([0, 1, 2], [1.0, 2.0, 4.0])  # slope 1.5, intercept 5/6
    assert got == {"us_per_node": 1.5, "fixed_us": 0.83}


@pytest.mark.cuda
def test_a_graph_of_k_nodes_replays_every_node():
    for name, node in floor.nodes().items():
        us, counted = floor.replay_us(node, 10, replays=20, repeats=2)
        assert counted and us > 0, name


def test_the_recorded_floor_is_its_own_fit():
    """results/h200_floor.json: every node ran, and each way's µs per node and fixed µs are
    the line fitted through its recorded times from K = 10 on (a changed number fails)."""
    rec = load_floor()
    assert rec["provenance"]["gpu"] and rec["provenance"]["commit"]
    ways = [k for k, v in rec.items() if isinstance(v, dict) and "us" in v]
    assert ways == ["torch add_", "triton", "triton, PDL"]
    for way in ways:
        r = rec[way]
        fitted = [(k, t) for k, t in zip(rec["ks"], r["us"]) if k >= 10]
        assert r["counted"] and floor.fit(*zip(*fitted)) == {
            "us_per_node": r["us_per_node"],
            "fixed_us": r["fixed_us"],
        }, way
    assert rec["triton, PDL"]["us_per_node"] < rec["triton"]["us_per_node"]
