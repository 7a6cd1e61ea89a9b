"""lab.engine_time on the CPU: the workload is the bench's, the sections add up to the wall
time, the variants' tokens agree (overlap changes when the host works, not what runs), and
the interval arithmetic of the GPU busy share. The GPU side (profiled) runs in bench."""

import json
from pathlib import Path

import pytest

from tinyllm import PagedEngine
from tinyllm.lab import engine_time as et
from tinyllm.lab import simgraph

RECORDED = Path(__file__).resolve().parent.parent / "results" / "h200_engine.json"


def test_the_workload_is_the_bench_engine_workload():
    prompts, news = et.workload(256)
    assert len(prompts) == len(news) == 256
    assert min(map(len, prompts)) >= 8 and max(map(len, prompts)) <= 64
    assert min(news) >= 32 and max(news) <= 256
    assert et.workload(256) == (prompts, news)  # seeded: the same every time


def test_union_and_merge_count_overlaps_once():
    spans = [(0, 2), (1, 3), (5, 6), (5.5, 5.7)]
    assert et.union_us(spans) == 4
    assert et.merge(spans) == [(0, 3), (5, 6)]
    assert et.union_us([]) == 0


@pytest.mark.parametrize("name", list(et.ENGINES))
def test_each_engine_serves_the_workload_and_its_sections_add_up(toy_model, name):
    prompts, news = et.workload(6)
    engine = et.build(name, toy_model, 3, max_len=256, use_graph=True, graph_api=simgraph)
    et.capture(engine)
    row = et.timed_run(engine, prompts, [n // 8 for n in news])
    shares = row["sections"]
    assert list(shares) == list(et.SECTIONS)
    assert all(v >= 0 for v in list(shares.values())[:-1])
    assert abs(sum(shares.values()) - 1) < 1e-3 and shares["other host"] > -1e-3
    spans = et.host_spans(engine, 0.0)
    assert len(spans["launch"]) == len(engine.stats) and len(spans["admission"]) >= 1


def test_the_variants_give_the_same_tokens(toy_model):
    prompts, news = et.workload(5)
    news = [n // 10 for n in news]
    outs = {}
    for name in et.ENGINES:
        engine = et.build(name, toy_model, 2, max_len=256, use_graph=True, graph_api=simgraph)
        done, _ = et.serve(engine, prompts, news)
        outs[name] = [done[r] for r in sorted(done)]
    assert len({json.dumps(v) for v in outs.values()}) == 1


def test_serve_raises_when_tokens_are_lost(toy_model):
    engine = PagedEngine(toy_model, 2, max_len=64, use_graph=False, eos_id=None)
    prompts, news = [[1, 2, 3]], [4]
    engine.submit = lambda p, n, **kw: PagedEngine.submit(engine, p, n - 1)  # one token short
    with pytest.raises(RuntimeError, match="lost tokens"):
        et.serve(engine, prompts, news)


def test_the_recorded_engine_rows_are_their_detail():
    """results/h200_engine.json: each engine_paged row is read from its detail (tok_s of
    overlap=True, speedup over the slot engine of the same run)."""
    rec = json.loads(RECORDED.read_text())
    ep = rec["engine_paged"]
    assert [r["n_slots"] for r in ep["rows"]] == [32, 8]
    assert ep["gpu_busy_share"] == et.GPU_BUSY  # how it was measured, as the code says
    for row in ep["rows"]:
        d = ep["detail"][str(row["n_slots"])]
        assert row["tok_s"] == d["paged_overlap"]["tok_s"]
        assert row["slots_tok_s"] == d["slots"]["tok_s"]
        assert row["speedup_over_slots"] == round(row["tok_s"] / row["slots_tok_s"], 2)
        assert row["gpu_busy_share"] == d["paged_overlap"]["gpu_busy_share"]
        assert 0 < row["gpu_busy_share"] <= 1
        assert d["overlap_tokens_identical"] is True
