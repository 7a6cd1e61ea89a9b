"""CUDA-graph decode (notebooks 03-06).

A decode step of a small model is launch-bound: one kernel per op, dozens of them (notebook 01
counts them), each a microsecond or two of GPU work, and the CPU needs longer to launch each
one than the GPU needs to run it. A CUDA graph records the whole step once and replays it
with a single launch; then what is left is the kernels themselves, so the step also keeps
its kernel count low (model.attend, and the caches' mask kept on the device).

A graph replays fixed kernels on fixed addresses, so the step must have static shapes:
- StaticKVCache (kv_cache.py) keeps the position as a device tensor. K/V are written with
  index_copy_ at that position, RoPE is gathered at it, and every decode step attends over
  a fixed window of W keys, with keys past the position masked out.
- W comes from length buckets (128, 256, ..., max_len). Each bucket has its own graph;
  the step uses the smallest bucket that holds pos + 1 keys. All graphs share one memory
  pool and the same static buffers (cache, input token, position).
- Prefill stays eager: it runs once per request and has a different shape each time.
  Sampling stays eager too.

Not bit-identical to eager generate(): eager decode attends over exactly pos + 1 keys with
no mask, which SDPA runs with its flash kernel; the static step attends over W keys with a
mask, which SDPA runs with its memory-efficient kernel (results/h200_probe.json), and the two
sum in different orders (notebook 05 measures by how much). Graph replay *is* bit-identical
to the same static step run eagerly: use_graph=False runs it, on any device, as the reference.

Every CUDA-graph call goes through `graph_api`: torch.cuda on a GPU, or
tinyllm.lab.simgraph, which simulates capture and replay on a CPU (notebook 04).
"""

import math
import time

import torch
from torch import Tensor

from tinyllm.checks import (
    check_fused,
    check_generate_args,
    check_ids,
    check_int,
    check_prompt,
    check_use_graph,
    check_windows,
    is_int,
    model_device,
)
from tinyllm.generation import activation_dtype, decode_n_tokens, precision
from tinyllm.kv_cache import SlotKVCache, StaticKVCache
from tinyllm.model import Transformer

# --- buckets (notebook 03) -----------------------------------------------------------------


MAX_BUCKETS = 64  # a graph each: more would be a mistake, and would take long to capture


def default_buckets(max_len: int, first: int = 128, growth: float = 2) -> tuple[int, ...]:
    """first, first·growth, first·growth², ... below max_len, then max_len itself (each at
    least one more than the one before)."""
    check_int("max_len", max_len)
    check_int("first bucket", first)
    if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not growth > 1:
        raise ValueError(f"growth must be a number > 1, got {growth!r}")
    out, b = [], first
    while b < max_len:
        out.append(b)
        if len(out) == MAX_BUCKETS:
            raise ValueError(
                f"growth {growth} from first bucket {first} gives more than {MAX_BUCKETS} "
                f"buckets below max_len {max_len}: grow faster or start larger"
            )
        b = max(b + 1, math.ceil(b * growth))
    return (*out, max_len)


def bucket_for(n_keys: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket that holds n_keys keys."""
    for b in buckets:
        if b >= n_keys:
            return b
    raise ValueError(f"{n_keys} keys > largest bucket {buckets[-1]}")


def check_buckets(buckets, max_len: int) -> tuple[int, ...]:
    if buckets is None:
        return default_buckets(max_len)
    if isinstance(buckets, (int, str)) or not hasattr(buckets, "__iter__"):
        raise ValueError(f"buckets must be a tuple of positive ints, got {buckets!r}")
    if any(not is_int(b) or b < 1 for b in buckets):
        raise ValueError(f"buckets must be positive ints, got {tuple(buckets)}")
    buckets = tuple(sorted(set(buckets)))
    if not buckets or len(buckets) > MAX_BUCKETS:
        raise ValueError(f"buckets must hold 1 to {MAX_BUCKETS} windows, got {len(buckets)}")
    if buckets[-1] != max_len:
        relation = "<" if buckets[-1] < max_len else ">"
        raise ValueError(
            f"largest bucket {buckets[-1]} {relation} max_len {max_len}: "
            f"the buckets must end at max_len"
        )
    return buckets


def bucket_windows(buckets, max_len: int) -> list[int]:
    """The window of the step that attends over n = 1..max_len keys (the step at position
    n - 1): the smallest bucket that holds n."""
    buckets = check_buckets(buckets, max_len)
    return [bucket_for(n, buckets) for n in range(1, max_len + 1)]


def wasted_share(buckets, max_len: int) -> float:
    """Share of a whole max_len-token generation's attention work spent on masked keys:
    sum(window - n) / sum(window) over n = 1..max_len."""
    windows = bucket_windows(buckets, max_len)
    return sum(w - n for n, w in enumerate(windows, 1)) / sum(windows)


def bucket_tradeoff(max_len: int, first: int = 128, growths=(8, 4, 2, 1.5, 1.25)) -> list[dict]:
    """One window of max_len keys, then default_buckets(max_len, first, g) for each growth g:
    {"growth", "buckets", "n_graphs", "wasted_share"} each (growth None for one window)."""
    rows = [{"growth": None, "buckets": (max_len,)}]
    rows += [{"growth": g, "buckets": default_buckets(max_len, first, g)} for g in growths]
    for r in rows:
        r["n_graphs"] = len(r["buckets"])
        r["wasted_share"] = wasted_share(r["buckets"], max_len)
    return rows


# --- fused kernels (notebook 07) -----------------------------------------------------------

# fused=True: the step's kernels come from torch.compile (Inductor fuses the elementwise
# chains into a few Triton kernels) without CUDA graphs of its own, so the graphs are still
# ours: one per bucket, one shared pool. One compiled shape per window and batch size.
# Inductor's options: coordinate-descent tuning of each kernel's launch configuration, and
# Programmatic Dependent Launch (on Hopper GPUs a kernel may start while the one before
# finishes). A dict of torch.compile arguments replaces them: COMPILE_SHAPES | fused.
COMPILE_SHAPES = {"dynamic": False, "fullgraph": True}
FUSED_COMPILE = COMPILE_SHAPES | {
    "options": {"coordinate_descent_tuning": True, "triton.enable_pdl": True}
}


def compile_step(model: Transformer, fused):
    """The module that runs the step: the model itself, or torch.compile of it with
    FUSED_COMPILE (fused=True) or with COMPILE_SHAPES | fused (a dict)."""
    if fused is False:
        return model
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is not None and limit < 64:
        torch._dynamo.config.recompile_limit = 64  # windows × batch sizes, each compiled once
    return torch.compile(model, **(FUSED_COMPILE if fused is True else COMPILE_SHAPES | fused))


# --- the graphs ----------------------------------------------------------------------------


class WindowGraphs:
    """What both decoders share: the static step on static buffers (a cache in decode mode
    and the input token `tok`), run eagerly or replayed from one graph per window, all in
    one memory pool. The pool is created at the first capture, so use_graph=False needs no
    CUDA."""

    def __init__(self, model, cache, tok: Tensor, use_graph: bool, fused, graph_api):
        cfg = model.cfg
        cache.allocate(cfg.n_kv_heads, cfg.head_dim, activation_dtype(model), tok.device)
        self.model, self.cache, self.tok = model, cache, tok
        self.use_graph, self.graph_api = use_graph, graph_api
        self.step_model = compile_step(model, fused)
        self.graphs: dict[int, tuple] = {}  # window -> (graph, its static output logits)
        self.pool = None
        self.interrupted = None  # the positions before a step that has not finished

    @torch.no_grad()
    def forward(self) -> Tensor:
        """The static step itself: one token per row from self.tok, through the cache."""
        with precision(self.model):
            logits, _ = self.step_model(self.tok, cache=self.cache, check=False)
        return logits

    def capture_window(self, window: int) -> tuple:
        """Record the step over `window` keys as a graph into the shared pool, and keep it
        (self.graphs[window]); returns (graph, static logits). Kept, not only returned: once
        every graph of a pool has been freed, PyTorch refuses the next capture into that pool
        (an internal assert in its caching allocator, hit on the H200 by a graph thrown away)."""
        api, cache = self.graph_api, self.cache
        if self.pool is None:
            self.pool = api.graph_pool_handle()
        with cache.decoding(window):
            # Warm up on a side stream: the first run of each op loads kernels and makes
            # workspaces, which must not happen during capture. The warm-up really runs the
            # step, so it moves the device position: restore() puts the saved one back.
            saved = cache.snapshot()
            try:
                side = api.Stream()
                side.wait_stream(api.current_stream())
                with api.stream(side):
                    self.forward()
                api.current_stream().wait_stream(side)
            finally:
                cache.restore(saved)
            graph = api.CUDAGraph()
            with api.graph(graph, pool=self.pool):
                out = self.forward()  # recorded, not run: nothing moves until replay()
        self.graphs[window] = graph, out
        return graph, out

    @torch.no_grad()
    def capture(self, windows: tuple[int, ...] | None = None) -> float:
        """Capture graphs ahead of time (default: every bucket), so that no decode step pays
        for it. Largest first: the smaller graphs then fit in the memory the pool already
        holds. Returns the seconds it took."""
        windows = check_windows(windows, self.buckets)
        check_use_graph(True, self.tok.device, self.graph_api)
        self.recover()
        self.check_capture()
        t0 = time.perf_counter()
        for w in sorted(windows, reverse=True):
            if w not in self.graphs:
                self.capture_window(w)
        self.graph_api.synchronize()
        return time.perf_counter() - t0

    def recover(self) -> None:
        """If a step was interrupted (an exception, Ctrl-C) between moving the device
        positions and the host's, put the positions of before that step back. A host flag,
        set around every step: no device read."""
        if self.interrupted is not None:
            self.cache.restore(self.interrupted)
            self.interrupted = None

    def guarded_step(self, window: int) -> Tensor:
        """run(window) and advance the host positions, as one step: if it does not finish,
        the cache's positions go back to what they were before it."""
        self.recover()
        self.interrupted = self.cache.snapshot()  # host values: free
        try:
            out = self.run(window)
            self.cache.advance_host()  # the step moved the device positions; the host follows
        except BaseException:
            self.recover()
            raise
        self.interrupted = None
        return out

    def run(self, window: int) -> Tensor:
        """One decode step over `window` keys: eagerly, or by replaying its graph (captured
        the first time the window is needed). The host position is the caller's to advance."""
        if not self.use_graph:
            with self.cache.decoding(window):
                return self.forward()
        if window not in self.graphs:
            self.capture_window(window)
        graph, out = self.graphs[window]
        graph.replay()
        return out

    def check_tok(self, tok: Tensor) -> None:
        """tok must be ids in the vocabulary, one per row of the static input."""
        check_ids(tok, self.model.cfg.vocab_size, self.tok.device, name="tok")
        if tok.shape != self.tok.shape:
            raise ValueError(f"tok must have shape {tuple(self.tok.shape)}, got {tuple(tok.shape)}")

    def bucket_for(self, n_keys: int) -> int:
        return bucket_for(n_keys, self.buckets)


class GraphDecoder(WindowGraphs):
    """Prefill eagerly, then decode one token per row with one CUDA-graph replay per step.

    Reusable: prefill() resets the cache, and graphs captured for one request serve the
    next (same batch size). use_graph=False runs the identical static step eagerly, on any
    device: the reference that replay must match bit for bit. fused: False, True, or a dict
    of torch.compile arguments (notebook 07).
    """

    def __init__(self, model: Transformer, batch: int, max_len: int | None = None,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 fused=False, graph_api=torch.cuda):  # fmt: skip
        device = model_device(model)
        check_use_graph(use_graph, device, graph_api)
        check_fused(fused, device)
        check_int("batch", batch)
        self.max_len = model.cfg.max_seq_len if max_len is None else max_len
        if not is_int(self.max_len) or not 1 <= self.max_len <= model.cfg.max_seq_len:
            raise ValueError(
                f"max_len {self.max_len!r} outside [1, max_seq_len {model.cfg.max_seq_len}]"
            )
        self.buckets = check_buckets(buckets, self.max_len)
        cache = StaticKVCache(model.cfg.n_layers, batch, self.max_len, device)
        tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        super().__init__(model, cache, tok, use_graph, fused, graph_api)
        self.prefilled = False

    @property
    def batch(self) -> int:
        return self.cache.batch

    @torch.no_grad()
    def prefill(self, idx: Tensor, pad_lens: Tensor | None = None) -> Tensor:
        """idx (B, T), left-padded by pad_lens (B,) if given. Returns logits (B, T, V)."""
        check_prompt(idx, self.model, 0, pad_lens, self.max_len)
        if idx.shape[0] != self.batch:
            raise ValueError(f"batch {idx.shape[0]} != decoder batch {self.batch}")
        self.prefilled, self.interrupted = False, None  # until this prefill has finished
        self.cache.reset(pad_lens)
        with precision(self.model):
            logits, _ = self.model(idx, cache=self.cache, check=False)
        self.prefilled = True
        return logits

    def check_capture(self) -> None:
        if self.cache.n >= self.max_len:
            raise ValueError(
                f"KV cache full (position {self.cache.n} = max_len {self.max_len}): "
                f"prefill a new request before capturing"
            )

    @torch.no_grad()
    def step(self, tok: Tensor, check: bool = True) -> Tensor:
        """tok (B, 1) → logits (B, 1, V). With graphs, the result is a static buffer that
        the next step overwrites: read it (or sample from it) first. check=False skips the
        check of tok's ids (a device read), for tokens the caller sampled itself."""
        if check:
            self.check_tok(tok)
        if not self.prefilled:
            raise ValueError("call prefill(idx) before step(tok)")
        if self.cache.n >= self.max_len:  # an error, never a write past max_len
            raise ValueError(f"KV cache full: position {self.cache.n + 1} > max_len {self.max_len}")
        window = self.bucket_for(self.cache.n + 1)  # picked on the host: no device read
        self.tok.copy_(tok)  # into the static input
        return self.guarded_step(window)  # replay (or run) it; n follows pos

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, *, pad_lens: Tensor | None = None,
                 temperature: float = 0.0, top_k: int | None = None, seed: int | None = None,
                 eos_id: int | None = None) -> Tensor:  # fmt: skip
        """As generation.generate, with the static step (and its graphs) for decode."""
        vocab_size = self.model.cfg.vocab_size
        check_generate_args(max_new_tokens, temperature, top_k, vocab_size, seed, eos_id)
        check_prompt(idx, self.model, max_new_tokens, pad_lens, self.max_len)
        logits = self.prefill(idx, pad_lens)
        return decode_n_tokens(
            logits, lambda tok: self.step(tok, check=False), max_new_tokens,
            temperature=temperature, top_k=top_k, seed=seed, eos_id=eos_id,
        )  # fmt: skip


class SlotGraphDecoder(WindowGraphs):
    """The continuous engine's decode step (one token per SlotKVCache slot) as CUDA graphs
    (notebook 06). Admission, release and prefill stay eager in the engine.

    Why it can be a graph: the batch is always n_slots rows (free slots compute too), and
    slot lengths and active flags live in fixed device tensors that admit() and release()
    update in place. The one changing shape is the attention window, so the cache gets a
    fixed window from the length buckets, with keys past each slot's length masked.

    Each step writes the token into a static buffer and replays the graph for the smallest
    bucket that holds the longest slot + 1. The step advances the device lengths; the host
    lengths follow in advance_host(), after the step, replayed or eager. use_graph=False
    runs the identical windowed step eagerly, the reference that replay must match bit
    for bit.
    """

    def __init__(self, model: Transformer, slots: SlotKVCache,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 fused=False, graph_api=torch.cuda):  # fmt: skip
        device = model_device(model)
        check_use_graph(use_graph, device, graph_api)
        check_fused(fused, device)
        if not isinstance(slots, SlotKVCache):
            raise ValueError(f"SlotGraphDecoder decodes a SlotKVCache, got {type(slots).__name__}")
        if slots.lens_dev.device != device:
            raise ValueError(f"slot cache is on {slots.lens_dev.device}, the model on {device}")
        if slots.max_len > model.cfg.max_seq_len:
            raise ValueError(f"slot max_len {slots.max_len} > max_seq_len {model.cfg.max_seq_len}")
        self.buckets = check_buckets(buckets, slots.max_len)
        tok = torch.zeros(slots.n_slots, 1, dtype=torch.long, device=device)
        super().__init__(model, slots, tok, use_graph, fused, graph_api)

    def check_capture(self) -> None:
        if max(self.cache.lens) >= self.cache.max_len:
            raise ValueError(
                f"a slot is full (max_len {self.cache.max_len}): release it before capturing"
            )

    @torch.no_grad()
    def step(self, tok: Tensor, check: bool = True) -> Tensor:
        """tok (n_slots, 1) → logits (n_slots, 1, V). With graphs, the result is a static
        buffer that the next step overwrites: sample from it first."""
        if check:
            self.check_tok(tok)
        n_keys, max_len = max(self.cache.lens) + 1, self.cache.max_len
        if n_keys > max_len:
            raise ValueError(f"a slot is full: {n_keys} keys > max_len {max_len}")
        window = self.bucket_for(n_keys)
        self.tok.copy_(tok)
        return self.guarded_step(window)  # replay (or run) it; lens follow lens_dev
