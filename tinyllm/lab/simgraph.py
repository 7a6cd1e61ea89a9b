"""CUDA graphs simulated on the CPU, so that capture and replay (notebook 04) can be tried
on a laptop.

The decoders reach CUDA graphs through a `graph_api` module: torch.cuda on a GPU, this module
on a CPU. It has the names they call (CUDAGraph, graph, graph_pool_handle, Stream, stream,
current_stream, synchronize) with the semantics that surprise people:
- Capture records, it does not run. Each aten op inside `with graph(g):` does execute, so
  Python sees the right shapes, but every write to a tensor that existed before capture is
  undone at the end of it. Tensors made during capture are the graph's static outputs; on
  CUDA they hold nothing meaningful until the first replay, so here they are poisoned at the
  end of capture: NaN for floating dtypes, the dtype's largest value for integers, True for
  bool. Only replay() changes state.
- replay() re-runs the recorded ops on the same storages, bit for bit as running those ops
  eagerly. Outputs are static buffers that each replay overwrites (the same object every
  time); inputs must be updated in place (`x.copy_(new)`), since rebinding a name
  (`x = new`) leaves the graph reading the captured tensor.
- Host reads raise inside capture, with the message of CUDA's error for them, "operation
  not permitted when stream is capturing" (on the H200, PyTorch reported the capture that such
  a read invalidates: "operation failed due to a previous error during capture"): .item(),
  int(), bool(), `if t:`, .tolist(), .numpy(), .cpu(), printing or formatting a tensor, ops whose
  output shape depends on the data (nonzero, masked_select, unique, x[mask]), and copying
  host data into a new tensor (torch.tensor([...])). The capture is then abandoned: tensors
  are restored and the graph cannot be replayed.

What it does NOT model: no launch is saved. Replay re-dispatches every op from Python and
copies each result into its static buffer, so it is no faster than eager, and its timings
mean nothing. There are no streams (Stream, stream, current_stream and synchronize do
nothing) and pools are not shared: pool_bytes() counts every storage allocated during
capture, where CUDA's allocator reuses memory freed within the capture. Pool sharing and
capture order are shown from the H200 recording, not simulated. Not undone either: metadata
changes of pre-existing tensors (resize_, set_, unsqueeze_). Of the copies to the host, only
.cpu() is refused: every tensor is on the CPU already, so .to("cpu") cannot be told from
code that names its own device.
"""

import contextlib
import math
import time

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_NOT_PERMITTED = "operation not permitted when stream is capturing"
_HOST_READ = (
    "Reading a tensor's value on the host (.item(), int(t), `if t:`, print) waits "
    "for the GPU, and a graph records GPU work only: read it after replay()."
)
_DYNAMIC = (
    "Its output shape depends on the data, and a graph replays fixed shapes: use a "
    "fixed-shape form (a mask, torch.where) instead."
)
_HOST_DATA = (
    "Copying host data into a new tensor: on CUDA, a capture refuses a copy from host memory "
    "that is not pinned. Make the tensor before capture and update it in place."
)
_FUNCTIONS = {  # caught before they reach aten, or never reach it
    torch.Tensor.tolist: ("Tensor.tolist()", _HOST_READ),
    torch.Tensor.numpy: ("Tensor.numpy()", _HOST_READ),
    torch.Tensor.cpu: ("Tensor.cpu()", _HOST_READ),
    torch.Tensor.__repr__: ("printing a tensor", _HOST_READ),
    torch.Tensor.__format__: ("formatting a tensor", _HOST_READ),
    torch.tensor: ("torch.tensor(data)", _HOST_DATA),
    torch.as_tensor: ("torch.as_tensor(data)", _HOST_DATA),
    torch.asarray: ("torch.asarray(data)", _HOST_DATA),
}
_LIFTS = (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)


class _Capture(TorchDispatchMode):
    """Runs and records every aten op; saves each pre-existing storage before its first write."""

    def __init__(self):
        super().__init__()
        self.ops = []  # (func, args, kwargs, [(output index, static output)])
        self.new = {}  # data_ptr -> (storage, dtype): allocated during capture
        self.saved = {}  # data_ptr -> (storage, copy before capture)
        self.error = None  # the first refused operation, even if the caller caught it

    def refuse(self, what: str, why: str):
        self.error = RuntimeError(f"{_NOT_PERMITTED}: {what}. {why}")
        raise self.error

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.check(func, args)
        for t in _written(func, args, kwargs):
            s = t.untyped_storage()
            if s.data_ptr() not in self.new and s.data_ptr() not in self.saved:
                self.saved[s.data_ptr()] = (s, s.clone())
        out = func(*args, **kwargs)
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        fresh = [
            (i, t)
            for i, t in enumerate(tree_leaves(out))
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs
        ]
        for _, t in fresh:
            self.new.setdefault(t.untyped_storage().data_ptr(), (t.untyped_storage(), t.dtype))
        self.ops.append((func, args, kwargs, fresh))
        return out

    def check(self, func, args):
        if torch.Tag.data_dependent_output in func.tags:
            self.refuse(func.name(), _HOST_READ)
        if func is torch.ops.aten.index.Tensor:  # a gather is fine, a boolean mask is not
            if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in args[1]):
                self.refuse(f"{func.name()} with a boolean mask", _DYNAMIC)
        elif torch.Tag.dynamic_output_shape in func.tags:
            self.refuse(func.name(), _DYNAMIC)
        # x[:2] = 5.0 lifts the scalar 5.0 as a 0-d tensor, which CUDA allows too
        if func in _LIFTS and args[0].dim() > 0:
            self.refuse(func.name(), _HOST_DATA)

    def undo(self) -> None:
        for s, copy in self.saved.values():
            s.copy_(copy)
        self.saved.clear()

    def poison(self) -> None:
        for s, dtype in self.new.values():
            view = torch.empty(0, dtype=dtype).set_(s)
            if dtype.is_floating_point or dtype.is_complex:
                view.fill_(math.nan)
            else:
                view.fill_(True if dtype == torch.bool else torch.iinfo(dtype).max)


class _NoHostReads(TorchFunctionMode):
    """Catches the host reads that never reach an aten op: .tolist(), printing, torch.tensor."""

    def __init__(self, capture: _Capture):
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        what, why = _FUNCTIONS.get(func, (None, None))
        if why == _HOST_DATA and args and isinstance(args[0], torch.Tensor):
            what = None  # torch.as_tensor(t) of a tensor copies nothing from the host
        if what is not None:
            self.capture.refuse(what, why)
        return func(*args, **kwargs)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _written(func, args, kwargs) -> list[torch.Tensor]:
    """The tensors that func writes to, from its schema: `Tensor(a!) self`, `out=`."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            out += _tensors(args[i] if i < len(args) else kwargs.get(arg.name))
    return out


class CUDAGraph:
    """A recorded sequence of aten ops, replayed on the same tensors (see the module notes).

    Not a CUDA graph: replay() re-dispatches every op from Python, so no launch is saved, it
    is no faster than eager and its timings mean nothing. It shows the semantics: static output
    buffers, capture that records rather than runs, host reads refused during capture.
    """

    def __init__(self):
        self._state = "new"  # new → capturing → captured, or failed
        self._capture: _Capture | None = None

    def replay(self) -> None:
        """Re-run the recorded ops: views and in-place/out= ops do their own writing; the
        result of a functional op is copied into the static output that capture made."""
        if self._state != "captured":
            raise RuntimeError(
                f"cannot replay a graph that is {self._state}: replay only a "
                "graph whose `with graph(g):` block finished without an error"
            )
        if _launches_only:
            return
        with torch.no_grad():
            for func, args, kwargs, fresh in self._capture.ops:
                out = func(*args, **kwargs)
                if fresh:
                    leaves = tree_leaves(out)
                    for i, static in fresh:
                        static.copy_(leaves[i])

    def pool_bytes(self) -> int:
        """Bytes of the storages allocated during capture (the static outputs and every
        intermediate; CUDA would reuse memory freed within the capture)."""
        if self._capture is None:
            return 0
        return sum(s.nbytes() for s, _ in self._capture.new.values())

    def __repr__(self) -> str:
        n = len(self._capture.ops) if self._capture else 0
        return f"CUDAGraph({self._state}, {n} ops, {self.pool_bytes()} pool bytes, simulated)"


@contextlib.contextmanager
def graph(cuda_graph: CUDAGraph, pool=None, stream=None, capture_error_mode: str = "global"):
    """Capture the ops run in the block into cuda_graph. pool and stream are accepted and
    ignored (nothing is shared, there are no streams)."""
    if not isinstance(cuda_graph, CUDAGraph):
        raise ValueError(f"cuda_graph must be a simgraph.CUDAGraph, got {type(cuda_graph)}")
    if capture_error_mode not in ("global", "thread_local", "relaxed"):
        raise ValueError(
            f"capture_error_mode {capture_error_mode!r} is not one of "
            "'global', 'thread_local', 'relaxed'"
        )
    if cuda_graph._state != "new":
        raise RuntimeError(
            f"this CUDAGraph is {cuda_graph._state} and already owns a capture: "
            "to capture a new graph, create a new CUDAGraph"
        )
    capture = cuda_graph._capture = _Capture()
    cuda_graph._state = "capturing"
    try:
        with _NoHostReads(capture), capture:
            yield
        if capture.error is not None:  # refused inside the block, and the caller caught it
            raise RuntimeError(
                f"operation failed due to a previous error during capture: {capture.error}"
            ) from capture.error
    except BaseException:
        cuda_graph._state = "failed"
        capture.undo()
        capture.ops.clear()
        capture.new.clear()
        raise
    capture.undo()
    capture.poison()
    cuda_graph._state = "captured"


def graph_pool_handle() -> object:
    """An opaque handle. Pools are not shared in the simulation: graph() ignores it."""
    return object()


class Stream:
    """No streams on the CPU: every op runs in order, so waiting does nothing."""

    def __init__(self, device=None, priority: int = 0):
        pass

    def wait_stream(self, stream: "Stream") -> None:
        pass

    def synchronize(self) -> None:
        pass


_DEFAULT_STREAM = Stream()


@contextlib.contextmanager
def stream(s: Stream | None):
    """Does nothing: the block runs as it would outside it."""
    yield


def current_stream(device=None) -> Stream:
    return _DEFAULT_STREAM


_launches_only = False


@contextlib.contextmanager
def launches_only():
    """Inside this block, replay() returns at once, as a GPU's host does after it launches a
    graph: the graphs' work is skipped, and what they would write is not written. For timing
    the host's own work between replays. A simulated replay runs the whole model on the
    host's own cores, and leaves the host's caches cold for the code after it: on a 2-core
    CPU, the same few lines of the engine ran 2 to 5 times slower after a replay of 64 rows
    than with replays skipped."""
    global _launches_only
    before, _launches_only = _launches_only, True
    try:
        yield
    finally:
        _launches_only = before


class Event:
    """An event on the host's clock: record() notes time.perf_counter(); no stream to wait on,
    so the time between two events is the host's, the work between them done when it returns
    (a simulated replay included)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False):
        self.t = None

    def record(self, stream=None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time gives."""
        return (end.t - self.t) * 1e3


def synchronize(device=None) -> None:
    """Does nothing: CPU ops have finished when they return."""
