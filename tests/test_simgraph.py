"""tinyllm.lab.simgraph: CUDA-graph capture and replay simulated on the CPU.

Each test checks one behaviour a learner should see on a laptop as on a GPU: capture changes
nothing, outputs are static buffers, inputs are read in place, host reads are refused, and
replay gives exactly what eager gives.
"""

import pytest
import torch

from tinyllm import GraphDecoder
from tinyllm.lab import simgraph as api
from tinyllm.lab.simgraph import CUDAGraph, graph

NOT_PERMITTED = "operation not permitted when stream is capturing"


def captured(fn):
    """Capture fn() into a new graph; returns (graph, fn's output)."""
    g = CUDAGraph()
    with graph(g):
        out = fn()
    return g, out


def add_(x):
    x.add_(1)


ONE = torch.tensor([1])  # made before capture: torch.tensor inside it is refused


def index_copy_(x):
    x.index_copy_(0, ONE, torch.full((1,), 7.0))


def copy_(x):
    x.copy_(torch.ones_like(x))


def out_(x):
    torch.mul(x, 3, out=x)


def setitem(x):
    x[:2] = 5.0


@pytest.mark.parametrize("write", [add_, index_copy_, copy_, out_, setitem])
def test_capture_leaves_preexisting_tensors_unchanged(write):
    x = torch.arange(4.0)
    view = x[1:]  # a view shares the storage: it must come back too
    g, _ = captured(lambda: write(x))
    assert torch.equal(x, torch.arange(4.0))
    assert torch.equal(view, torch.arange(1.0, 4.0))
    g.replay()  # only replay changes state, as running it eagerly would
    expected = torch.arange(4.0)
    write(expected)
    assert torch.equal(x, expected)


def test_static_outputs_are_poisoned_until_replay():
    x = torch.arange(4.0)
    g, (y, n, m) = captured(lambda: (x * 2, x.long() + 1, x > 1))
    assert y.isnan().all()
    assert (n == torch.iinfo(torch.long).max).all()
    assert m.all()
    g.replay()
    assert torch.equal(y, torch.tensor([0.0, 2.0, 4.0, 6.0]))
    assert torch.equal(n, torch.tensor([1, 2, 3, 4]))
    assert torch.equal(m, torch.tensor([False, False, True, True]))


def test_replay_overwrites_the_same_output_object():
    x = torch.zeros(3)
    g, out = captured(lambda: x + 1)
    g.replay()
    first = out
    kept = out.clone()
    x.copy_(torch.full((3,), 10.0))
    g.replay()
    assert out is first
    assert torch.equal(first, torch.full((3,), 11.0))  # the earlier result is gone...
    assert torch.equal(kept, torch.ones(3))  # ...unless it was cloned


def test_rebinding_an_input_leaves_the_graph_reading_the_captured_tensor():
    x = torch.zeros(3)
    g, out = captured(lambda: x * 2)
    captured_x = x
    x = torch.ones(3)  # rebinds the name: the graph still reads captured_x
    g.replay()
    assert torch.equal(out, torch.zeros(3))
    captured_x.copy_(x)  # updates the captured tensor in place
    g.replay()
    assert torch.equal(out, torch.full((3,), 2.0))


def if_(t):
    if t[0]:
        pass


HOST_READS = {
    "item": lambda t: t[0].item(),
    "int": lambda t: int(t[0]),
    "float": lambda t: float(t[0]),
    "bool": lambda t: bool(t[0]),
    "if": if_,
    "index a list": lambda t: [1, 2][t.long()[0]],
    "tolist": lambda t: t.tolist(),
    "numpy": lambda t: t.numpy(),
    "print": lambda t: print(t),
    "repr": lambda t: repr(t),
    "f-string": lambda t: f"{t}",
    "format spec": lambda t: f"{t[0]:.2f}",
    "equal": lambda t: torch.equal(t, t),
    "nonzero": lambda t: t.nonzero(),
    "masked_select": lambda t: t.masked_select(t > 1),
    "boolean mask": lambda t: t[t > 1],
    "unique": lambda t: t.unique(),
    "torch.tensor": lambda t: torch.tensor([1.0, 2.0]),
    "torch.tensor scalar": lambda t: torch.tensor(3.0),
    "torch.as_tensor": lambda t: torch.as_tensor([1.0, 2.0]),
    "new_tensor": lambda t: t.new_tensor([1.0, 2.0]),
    "index with a list": lambda t: t[[0, 1]],
}


@pytest.mark.parametrize("read", HOST_READS.values(), ids=HOST_READS.keys())
def test_host_reads_inside_capture_raise_and_abandon_it(read):
    x = torch.arange(4.0)
    g = CUDAGraph()
    with pytest.raises(RuntimeError, match=NOT_PERMITTED):
        with graph(g):
            x.add_(1)  # undone with the capture
            read(x)
    assert torch.equal(x, torch.arange(4.0))
    with pytest.raises(RuntimeError, match="cannot replay a graph that is failed"):
        g.replay()
    assert g.pool_bytes() == 0
    # the process keeps working: no mode is left active
    assert x.sum().item() == 6.0 and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert repr(torch.tensor([1.0])) == "tensor([1.])"
    assert x.nonzero().shape == (3, 1)


def test_an_error_caught_inside_capture_still_fails_it():
    x = torch.arange(4.0)
    g = CUDAGraph()
    with pytest.raises(RuntimeError, match="previous error during capture"):
        with graph(g):
            x.add_(1)
            try:
                x[0].item()
            except RuntimeError:
                pass
    assert torch.equal(x, torch.arange(4.0))
    with pytest.raises(RuntimeError, match="failed"):
        g.replay()


def test_fixed_shape_work_is_allowed_inside_capture():
    x = torch.arange(4.0)
    pos = torch.tensor([2])
    g, (picked, clipped, shape, same) = captured(
        lambda: (x[pos], torch.where(x > 1, x, 0.0), x.shape[0] + len(x), torch.as_tensor(x))
    )
    assert shape == 8 and same is x
    g.replay()
    assert torch.equal(picked, torch.tensor([2.0]))
    assert torch.equal(clipped, torch.tensor([0.0, 0.0, 2.0, 3.0]))


def test_pool_bytes_counts_the_storages_made_during_capture():
    x = torch.ones(4, 4)
    g, (y, z) = captured(lambda: (x * 2, (x * 2 + 1).to(torch.float64)))
    # y, the two intermediates of z, and z itself
    assert g.pool_bytes() == 3 * 16 * 4 + 16 * 8
    assert y.untyped_storage().nbytes() + z.untyped_storage().nbytes() == 16 * 4 + 16 * 8
    assert CUDAGraph().pool_bytes() == 0


def test_replay_of_an_uncaptured_graph_raises():
    with pytest.raises(RuntimeError, match="cannot replay a graph that is new"):
        CUDAGraph().replay()


def test_capturing_twice_into_one_graph_raises():
    g, _ = captured(lambda: torch.ones(2) + 1)
    with pytest.raises(RuntimeError, match="already owns a capture"):
        with graph(g):
            pass


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="capture_error_mode 'strict'"):
        with graph(CUDAGraph(), capture_error_mode="strict"):
            pass
    with pytest.raises(ValueError, match="must be a simgraph.CUDAGraph"):
        with graph(object()):
            pass


class TinyStep:
    """A decode step in miniature: an MLP on the token's embedding, its result written into
    a cache at the device position, and the position advanced in place."""

    def __init__(self):
        self.emb = torch.nn.Embedding(16, 8)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.Linear(8, 16)
        )
        self.tok = torch.zeros(1, dtype=torch.long)
        self.pos = torch.zeros(1, dtype=torch.long)
        self.cache = torch.zeros(8, 8)

    def __call__(self) -> torch.Tensor:
        h = self.emb(self.tok)
        self.cache.index_copy_(0, self.pos, h)
        logits = self.mlp(self.cache.mean(0, keepdim=True))
        self.pos.add_(1)
        self.tok.copy_(logits.argmax(-1))
        return logits


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_decode_step_replays_like_eager(grad):
    torch.manual_seed(0)
    eager, sim = TinyStep(), TinyStep()
    sim.emb.load_state_dict(eager.emb.state_dict())
    sim.mlp.load_state_dict(eager.mlp.state_dict())
    with torch.set_grad_enabled(grad):
        g, out = captured(sim)
        assert sim.pos.item() == 0 and not sim.cache.any()
        history = out.grad_fn
        for _ in range(6):
            want = eager()
            g.replay()
            assert torch.equal(out, want)
    assert out.grad_fn is history  # replay adds no autograd history, even with grad on
    assert torch.equal(sim.cache, eager.cache) and torch.equal(sim.tok, eager.tok)
    assert sim.pos.item() == eager.pos.item() == 6


@torch.no_grad()
def test_toy_model_forward_replays_bit_exact(toy_model):
    idx = torch.randint(0, toy_model.cfg.vocab_size, (2, 5))
    weights = {k: v.clone() for k, v in toy_model.state_dict().items()}
    pool = api.graph_pool_handle()
    side = api.Stream()
    side.wait_stream(api.current_stream())
    with api.stream(side):
        toy_model(idx, check=False)  # warm-up, really runs (check=False: no host read)
    api.current_stream().wait_stream(side)
    g = api.CUDAGraph()
    with api.graph(g, pool=pool):
        logits, _ = toy_model(idx, check=False)
    assert logits.isnan().all()
    for _ in range(2):
        idx.copy_(torch.randint(0, toy_model.cfg.vocab_size, (2, 5)))
        g.replay()
        api.synchronize()
        assert torch.equal(logits, toy_model(idx)[0])
    assert all(torch.equal(v, weights[k]) for k, v in toy_model.state_dict().items())
    assert g.pool_bytes() > logits.nbytes


@torch.no_grad()
def test_the_course_decode_step_replays_like_its_eager_reference(toy_model):
    """GraphDecoder's static step (position in a device tensor, K/V written with index_copy_,
    a masked window), captured with its own capture_graph instead of on a GPU."""
    idx = torch.randint(0, toy_model.cfg.vocab_size, (2, 7))
    ref = GraphDecoder(toy_model, 2, max_len=32, buckets=(16, 32), use_graph=False)
    sim = GraphDecoder(toy_model, 2, max_len=32, buckets=(16, 32), graph_api=api)
    ref.prefill(idx)
    sim.prefill(idx)
    g, out = sim.capture_graph(16)
    assert sim.cache.pos.item() == 7  # recorded, not run
    tok = idx[:, -1:]
    for _ in range(8):
        ref.tok.copy_(tok)
        sim.tok.copy_(tok)
        want = ref.forward(16)
        g.replay()
        assert torch.equal(out, want)
        tok = want[:, -1].argmax(-1, keepdim=True)
    assert sim.cache.pos.item() == ref.cache.pos.item() == 15
    assert all(
        torch.equal(a, b) for a, b in zip(sim.cache.k + sim.cache.v, ref.cache.k + ref.cache.v)
    )


def test_inside_launches_only_a_replay_changes_nothing_and_after_it_runs_again():
    x = torch.zeros(3)
    g, _ = captured(lambda: add_(x))
    with pytest.raises(KeyError), api.launches_only():
        g.replay()
        assert torch.equal(x, torch.zeros(3))  # skipped: only the launch
        raise KeyError  # the block ends with an error: replays run again after it
    g.replay()
    assert torch.equal(x, torch.ones(3))
