"""The floor of a graph node (lab.floor): the line fitted through replay times, and on a GPU
the graphs of K kernels themselves; the floor of a grid-wide barrier, its bound under the
interpreter and its count on a GPU."""

import pytest

from tinyllm.lab import floor
from tinyllm.lab.results import load_floor


def test_fit_recovers_a_line_and_its_fixed_cost():
    got = floor.fit([10, 50, 100, 200], [3.0 + 0.5 * k for k in (10, 50, 100, 200)])
    assert got == {"us_per_node": 0.5, "fixed_us": 3.0}


def test_fit_of_a_noisy_line_is_its_least_squares_line():
    got = floor.fit([0, 1, 2], [1.0, 2.0, 4.0])  # slope 1.5, intercept 5/6
    assert got == {"us_per_node": 1.5, "fixed_us": 0.83}


def test_a_barrier_no_other_program_can_reach_runs_out_and_is_counted():
    """Triton's interpreter runs one program at a time, so a program that waits for the
    others cannot be joined: its wait runs out after SPINS reads, and is counted, where a
    barrier with no bound would hang. One program waits for no one."""
    pytest.importorskip("triton")
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    from tinyllm.kernels import library_interpreted

    kernel = InterpretedFunction(floor.barrier_kernel().fn)
    counts = {}
    for programs in (1, 3):
        counts[programs] = torch.zeros(2, dtype=torch.int32)
        with library_interpreted():
            kernel[(programs,)](counts[programs], K=4, SPINS=5)
    assert counts[1].tolist() == [4, 0]
    # 12 arrivals; program 0 ran out at its 4 barriers, program 1 at its last 2, program 2
    # found every other program's arrivals already counted
    assert counts[3].tolist() == [12, 6]


@pytest.mark.cuda
def test_a_grid_barrier_holds_every_program():
    """One program a multiprocessor and four: every program passes every barrier, and no
    wait runs out."""
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for programs in (1, sms, floor.MOST_PER_SM * sms):
        us, counted = floor.barrier_us(programs, 10, replays=20, repeats=2)
        assert counted and us > 0, programs
    limit = rf"programs must be an int in \[1, {floor.MOST_PER_SM * sms}\], got {5 * sms}"
    with pytest.raises(ValueError, match=limit):  # more might not all run at once: refused
        floor.barrier_floor(ks=(1,), programs=(1, 5 * sms))


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


def test_the_recorded_barrier_costs_a_node_and_twice_a_node_with_pdl():
    """results/h200_floor.json, part "barriers": every barrier held, each count's µs per
    barrier is its own fit; with one program a multiprocessor (132 on the H200) a barrier cost
    about a Triton node of the same run and about twice one with PDL; one program less, four
    a multiprocessor more, as notebook 11 says."""
    bar = load_floor()["barriers"]
    assert bar["provenance"]["commit"] and not bar["provenance"]["dirty"]
    for key in ("1 programs", "132 programs", "528 programs"):
        r = bar[key]
        fitted = [(k, t) for k, t in zip(bar["ks"], r["us"]) if k >= 10]
        line = floor.fit(*zip(*fitted))
        assert r["counted"] and (r["us_per_barrier"], r["fixed_us"]) == (
            line["us_per_node"], line["fixed_us"]), key  # fmt: skip
    each = {k: bar[f"{k} programs"]["us_per_barrier"] for k in (1, 132, 528)}
    nodes = bar["nodes_same_run"]
    assert all(nodes[w]["counted"] for w in ("torch add_", "triton", "triton, PDL"))
    assert 0.8 < each[132] / nodes["triton"]["us_per_node"] < 1.25
    assert 1.7 < each[132] / nodes["triton, PDL"]["us_per_node"] < 2.3
    assert each[1] < each[132] < each[528]
    # a later run: waits that read the count with volatile loads, not atomic adds, took a
    # little less with one program and with 132, more with 528
    polling = bar["polling"]
    atomic, volatile = ({n: polling[way][f"{n} programs"] for n in (1, 132, 528)}
                        for way in ("atomic reads (lab.floor)", "volatile loads"))  # fmt: skip
    assert all(r["counted"] for r in [*atomic.values(), *volatile.values()])
    assert volatile[1]["us_per_barrier"] < atomic[1]["us_per_barrier"]
    assert volatile[132]["us_per_barrier"] < atomic[132]["us_per_barrier"]
    assert volatile[528]["us_per_barrier"] > atomic[528]["us_per_barrier"]
