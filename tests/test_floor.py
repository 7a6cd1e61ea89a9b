"""The floor of a graph node (lab.floor): the line fitted through replay times, and on a GPU
the graphs of K kernels themselves."""

import pytest

from tinyllm.lab import floor


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
