"""CUDA-graph decode (notebooks 02-06).

A decode step of a small model is launch-bound: ~10 kernels per layer, each a few µs of
GPU work, and the CPU needs about as long to launch each one. A CUDA graph records the
whole step once and replays it with a single launch.

A graph replays fixed kernels on fixed addresses, so the step must have static shapes:
- StaticKVCache keeps the position as a device tensor. K/V are written with index_copy_
  at that position, RoPE is gathered at it, and every decode step attends over a fixed
  window of W keys, with keys past the position masked out.
- W comes from length buckets (128, 256, ..., max_len). Each bucket has its own graph;
  the step uses the smallest bucket that holds pos + 1 keys. All graphs share one memory
  pool and the same static buffers (cache, input token, position).
- Prefill stays eager: it runs once per request and has a different shape each time.
  Sampling stays eager too.

Not bit-identical to eager generate(): eager decode attends over exactly pos + 1 keys
with no mask; the graph attends over W keys with a mask, and SDPA picks a different
kernel for that. Graph replay *is* bit-identical to the same static step run eagerly:
use_graph=False runs it, on any device, as the reference.

Autocast runs with cache_enabled=False (generation.autocast): its weight-cast cache
doesn't survive capture.
"""

import math
import time

import torch
from torch import Tensor

from tinyllm.generation import (autocast, check_generate_args, check_ids, check_prompt,
                                decode_n_tokens, model_device)
from tinyllm.kv_cache import SlotKVCache, causal_kwargs, padded_causal_mask
from tinyllm.model import Transformer


def default_buckets(max_len: int, first: int = 128, growth: float = 2) -> tuple[int, ...]:
    """first, first·growth, first·growth², ... below max_len, then max_len itself."""
    if not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")
    if not isinstance(first, int) or first < 1:
        raise ValueError(f"first bucket must be an int >= 1, got {first!r}")
    if not growth > 1:
        raise ValueError(f"growth must be > 1, got {growth!r}")
    out, b = [], first
    while b < max_len:
        out.append(b)
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
    buckets = tuple(sorted(set(buckets)))
    if not buckets or any(not isinstance(b, int) or b < 1 for b in buckets):
        raise ValueError(f"buckets must be positive ints, got {buckets}")
    if buckets[-1] != max_len:
        relation = "<" if buckets[-1] < max_len else ">"
        raise ValueError(f"largest bucket {buckets[-1]} {relation} max_len {max_len}: "
                         f"the buckets must end at max_len")
    return buckets


def check_use_graph(use_graph: bool, device: torch.device) -> None:
    if use_graph and device.type != "cuda":
        raise ValueError(f"CUDA graphs need a model on a CUDA device, this one is on "
                         f"{device}; use use_graph=False to run the same static step eagerly")


def check_fused(fused: bool, device: torch.device) -> None:
    if fused and device.type != "cuda":
        raise ValueError(f"fused=True compiles the step for a CUDA device, the model is on "
                         f"{device}; leave fused=False on the CPU")


class StaticKVCache:
    """Shared-position cache with fixed shapes (B rows, max_len positions).

    Same model protocol as kv_cache.KVCache. Two modes:
    - prefill (eager, position 0): as KVCache, writes and returns positions 0..T-1.
    - decode (`window` set, T=1): position from the device tensor `pos`; returns the first
      `window` keys with a mask, so shapes don't depend on the position.
    first_valid (B,) is the left-pad count per row; zeros when unpadded.
    """

    def __init__(self, n_layers: int, batch: int, max_len: int, device):
        self.n_layers, self.batch, self.max_len = n_layers, batch, max_len
        self.k: list[Tensor | None] = [None] * n_layers
        self.v: list[Tensor | None] = [None] * n_layers
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.first_valid = torch.zeros(batch, dtype=torch.long, device=device)
        self.padded = False
        self.n = 0  # host copy of pos
        self.window: int | None = None
        self.attn_kwargs: dict = {}

    def reset(self, pad_lens: Tensor | None = None) -> None:
        self.n, self.window = 0, None
        self.pos.zero_()
        self.padded = pad_lens is not None
        self.first_valid.copy_(pad_lens if self.padded else torch.zeros_like(self.first_valid))

    def begin_step(self, T: int, rope) -> tuple[Tensor, Tensor]:
        if self.window is None:
            if self.n != 0:
                raise ValueError(f"StaticKVCache prefills only from position 0, not {self.n}")
            cos, sin = rope(T, 0)
            self.attn_kwargs = ({"attn_mask": padded_causal_mask(0, T, self.first_valid)}
                                if self.padded else causal_kwargs(0, T, cos.device))
            return cos, sin
        if T != 1:
            raise ValueError(f"decode takes one token per row, got T={T}")
        k_pos = torch.arange(self.window, device=self.pos.device)
        valid = (k_pos <= self.pos) & (k_pos >= self.first_valid[:, None])
        self.attn_kwargs = {"attn_mask": valid[:, None, None, :]}
        return rope.cos.index_select(0, self.pos), rope.sin.index_select(0, self.pos)

    def end_step(self, T: int) -> None:
        if self.window is None:
            self.n = T
            self.pos.fill_(T)
        else:
            self.pos.add_(1)

    def layer(self, i: int) -> "StaticLayerKV":
        return StaticLayerKV(self, i)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


class StaticLayerKV:
    def __init__(self, cache: StaticKVCache, i: int):
        self.cache, self.i = cache, i
        self.attn_kwargs = cache.attn_kwargs

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c, i = self.cache, self.i
        B, H, T, D = k.shape
        if c.k[i] is None:
            shape = (c.batch, H, c.max_len, D)
            c.k[i] = torch.zeros(shape, dtype=k.dtype, device=k.device)
            c.v[i] = torch.zeros(shape, dtype=v.dtype, device=v.device)
        elif c.k[i].dtype != k.dtype:
            raise ValueError(f"cache holds {c.k[i].dtype}, got {k.dtype}")
        if c.window is None:
            if T > c.max_len:
                raise ValueError(f"KV cache full: position {T} > max_len {c.max_len}")
            c.k[i][:, :, :T] = k
            c.v[i][:, :, :T] = v
            return c.k[i][:, :, :T], c.v[i][:, :, :T]
        c.k[i].index_copy_(2, c.pos, k)
        c.v[i].index_copy_(2, c.pos, v)
        return c.k[i][:, :, :c.window], c.v[i][:, :, :c.window]


# fused=True: the step's kernels come from torch.compile (Inductor fuses the elementwise
# chains into a few Triton kernels) without its own CUDA graphs, so the graphs are still
# ours: one per bucket, one shared pool. One compiled shape per window and batch size.
FUSED_COMPILE = {"mode": "default", "dynamic": False, "fullgraph": True}


def compile_step(model: Transformer):
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is not None and limit < 64:
        torch._dynamo.config.recompile_limit = 64  # windows × batch sizes, each compiled once
    return torch.compile(model, **FUSED_COMPILE)


class _Graphs:
    """What both decoders share: one graph per window, all in one memory pool, captured
    after a warm-up on a side stream."""

    def __init__(self, model: Transformer, tok: Tensor, cache, use_graph: bool, fused: bool):
        self.model, self.tok, self.cache, self.use_graph = model, tok, cache, use_graph
        self.step_model = compile_step(model) if fused else model
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, Tensor]] = {}
        self.pool = None  # created at the first capture, so use_graph=False needs no CUDA

    @torch.no_grad()
    def forward(self) -> Tensor:
        with autocast(self.tok.device):
            logits, _ = self.step_model(self.tok, cache=self.cache)
        return logits

    def capture_one(self, window: int, save, restore) -> tuple[torch.cuda.CUDAGraph, Tensor]:
        # Warm up on a side stream first: the first run of an op allocates workspaces and
        # picks kernels, which must not happen during capture. The warm-up really runs the
        # step, so it advances the position; restore() puts the saved state back.
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        self.cache.window = window
        state = save()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.forward()
        torch.cuda.current_stream().wait_stream(side)
        restore(state)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = self.forward()  # recorded, not run: nothing moves until replay()
        return graph, out

    def capture_all(self, windows, capture) -> float:
        check_use_graph(True, self.tok.device)
        t0 = time.perf_counter()
        try:
            for w in sorted(windows, reverse=True):
                if w not in self.graphs:
                    self.graphs[w] = capture(w)
        finally:
            self.cache.window = None
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def run(self, window: int, capture) -> Tensor:
        """One decode step over `window` keys: eagerly, or by replaying its graph."""
        self.cache.window = window
        if not self.use_graph:
            return self.forward()
        if window not in self.graphs:
            self.graphs[window] = capture(window)
        graph, out = self.graphs[window]
        graph.replay()
        return out


class GraphDecoder:
    """Prefill eagerly, then decode one token per row with one CUDA-graph replay per step.

    Reusable: prefill() resets the cache, and graphs captured for one request serve the
    next (same batch size). use_graph=False runs the identical static step eagerly, on any
    device: the reference that replay must match bit for bit.
    """

    def __init__(self, model: Transformer, batch: int, max_len: int | None = None,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 fused: bool = False):
        device = model_device(model)
        check_use_graph(use_graph, device)
        check_fused(fused, device)
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        self.model = model
        self.max_len = model.cfg.max_seq_len if max_len is None else max_len
        if not isinstance(self.max_len, int) or not 1 <= self.max_len <= model.cfg.max_seq_len:
            raise ValueError(f"max_len {self.max_len} outside [1, max_seq_len {model.cfg.max_seq_len}]")
        self.buckets = check_buckets(buckets, self.max_len)
        self.cache = StaticKVCache(model.cfg.n_layers, batch, self.max_len, device)
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.use_graph = use_graph
        self.graphs = _Graphs(model, self.tok, self.cache, use_graph, fused)
        self.prefilled = False

    @property
    def batch(self) -> int:
        return self.cache.batch

    def bucket_for(self, n_keys: int) -> int:
        return bucket_for(n_keys, self.buckets)

    @torch.no_grad()
    def prefill(self, idx: Tensor, pad_lens: Tensor | None = None) -> Tensor:
        """idx (B, T), left-padded by pad_lens (B,) if given. Returns logits (B, T, V)."""
        check_prompt(idx, self.model, 0, pad_lens, self.max_len)
        if idx.shape[0] != self.batch:
            raise ValueError(f"batch {idx.shape[0]} != decoder batch {self.batch}")
        self.cache.reset(pad_lens)
        with autocast(self.tok.device):
            logits, _ = self.model(idx, cache=self.cache)
        self.prefilled = True
        return logits

    def _capture(self, window: int) -> tuple[torch.cuda.CUDAGraph, Tensor]:
        c = self.cache
        if c.n >= self.max_len:
            raise ValueError(f"KV cache full (position {c.n} = max_len {self.max_len}): "
                             f"prefill a new request before capturing")
        return self.graphs.capture_one(window, save=lambda: c.pos.clone(),
                                       restore=lambda saved: c.pos.copy_(saved))

    @torch.no_grad()
    def capture(self, windows: tuple[int, ...] | None = None) -> float:
        """Capture graphs ahead of time (default: every bucket), so no timed step pays for
        it. Largest first: the smaller graphs then fit in the memory the pool already has.
        Returns the seconds it took."""
        return self.graphs.capture_all(check_windows(windows, self.buckets), self._capture)

    def check_step(self, tok: Tensor) -> None:
        check_ids(tok, self.model.cfg.vocab_size, self.tok.device, name="tok")
        if tok.shape != (self.batch, 1):
            raise ValueError(f"tok must have shape ({self.batch}, 1), got {tuple(tok.shape)}")
        if not self.prefilled:
            raise ValueError("call prefill(idx) before step(tok)")
        if self.cache.n >= self.max_len:
            raise ValueError(f"KV cache full: position {self.cache.n + 1} > max_len {self.max_len}")

    @torch.no_grad()
    def step(self, tok: Tensor) -> Tensor:
        """tok (B, 1) → logits (B, 1, V). With graphs, the result is a static buffer that
        the next step overwrites: read it (or sample from it) first."""
        self.check_step(tok)
        return self._step(tok)

    def _step(self, tok: Tensor) -> Tensor:
        c = self.cache
        window = self.bucket_for(c.n + 1)
        self.tok.copy_(tok)
        try:
            out = self.graphs.run(window, self._capture)
        finally:
            c.window = None
        c.n += 1
        return out

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, *, pad_lens: Tensor | None = None,
                 temperature: float = 0.0, top_k: int | None = None, seed: int | None = None,
                 eos_id: int | None = None) -> Tensor:
        """As generation.generate, with the static step (and its graphs) for decode."""
        check_generate_args(max_new_tokens, temperature, top_k, self.model.cfg.vocab_size,
                            seed, eos_id)
        check_prompt(idx, self.model, max_new_tokens, pad_lens, self.max_len)
        logits = self.prefill(idx, pad_lens)
        return decode_n_tokens(logits, self._step, max_new_tokens, temperature=temperature,
                               top_k=top_k, seed=seed, eos_id=eos_id)


def check_windows(windows, buckets: tuple[int, ...]) -> tuple[int, ...]:
    if windows is None:
        return buckets
    unknown = [w for w in windows if w not in buckets]
    if unknown:
        raise ValueError(f"window {unknown[0]} is not one of the buckets {buckets}")
    return tuple(windows)


class SlotGraphDecoder:
    """The continuous engine's decode step (one token per SlotKVCache slot) as CUDA graphs
    (notebook 06). Admission, release and prefill stay eager in the engine.

    Why it can be a graph: the batch is always n_slots rows (free slots compute too), and
    slot lengths and active flags live in fixed device tensors that admit() and release()
    update in place. The one changing shape is the attention window, so the cache gets a
    fixed window from the length buckets, with keys past each slot's length masked.

    Each step writes the token into a static buffer and replays the graph for the smallest
    bucket that holds the longest slot + 1. The step advances the device lengths; the host
    lengths move in advance_host(), after the step, replayed or eager. use_graph=False
    runs the identical windowed step eagerly, the reference that replay must match bit
    for bit.
    """

    def __init__(self, model: Transformer, slots: SlotKVCache,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 fused: bool = False):
        device = model_device(model)
        check_use_graph(use_graph, device)
        check_fused(fused, device)
        if not isinstance(slots, SlotKVCache):
            raise ValueError(f"SlotGraphDecoder decodes a SlotKVCache, got {type(slots).__name__}")
        if slots.lens_dev.device != device:
            raise ValueError(f"slot cache is on {slots.lens_dev.device}, the model on {device}")
        if slots.max_len > model.cfg.max_seq_len:
            raise ValueError(f"slot max_len {slots.max_len} > max_seq_len {model.cfg.max_seq_len}")
        self.model, self.slots = model, slots
        self.buckets = check_buckets(buckets, slots.max_len)
        self.tok = torch.zeros(slots.n_slots, 1, dtype=torch.long, device=device)
        self.use_graph = use_graph
        self.graphs = _Graphs(model, self.tok, slots, use_graph, fused)

    def bucket_for(self, n_keys: int) -> int:
        return bucket_for(n_keys, self.buckets)

    def _capture(self, window: int) -> tuple[torch.cuda.CUDAGraph, Tensor]:
        c = self.slots
        if max(c.lens) >= c.max_len:
            raise ValueError(f"a slot is full (max_len {c.max_len}): release it before capturing")
        return self.graphs.capture_one(window, save=lambda: c.lens_dev.clone(),
                                       restore=lambda saved: c.lens_dev.copy_(saved))

    @torch.no_grad()
    def capture(self, windows: tuple[int, ...] | None = None) -> float:
        """Capture graphs ahead of time (default: every bucket), largest first. Safe between
        steps: the warm-up's K/V writes land at each slot's next position, which the next
        real step overwrites. Returns the seconds it took."""
        return self.graphs.capture_all(check_windows(windows, self.buckets), self._capture)

    @torch.no_grad()
    def step(self, tok: Tensor) -> Tensor:
        """tok (n_slots, 1) → logits (n_slots, 1, V). With graphs, the result is a static
        buffer that the next step overwrites: sample from it first."""
        c = self.slots
        check_ids(tok, self.model.cfg.vocab_size, self.tok.device, name="tok")
        if tok.shape != (c.n_slots, 1):
            raise ValueError(f"tok must have shape ({c.n_slots}, 1), got {tuple(tok.shape)}")
        need = max(c.lens) + 1
        if need > c.max_len:
            raise ValueError(f"a slot is full: {need} keys > max_len {c.max_len}")
        self.tok.copy_(tok)
        try:
            out = self.graphs.run(self.bucket_for(need), self._capture)
        finally:
            c.window = None
        c.advance_host()  # the step advanced only the device lengths
        return out
