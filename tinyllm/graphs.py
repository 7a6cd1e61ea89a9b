"""CUDA-graph decode (notebooks 03-07).

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

from tinyllm.generation import decode_n_tokens
from tinyllm.kv_cache import SlotKVCache, StaticKVCache
from tinyllm.model import Transformer
from tinyllm.precision import activation_dtype, precision
from tinyllm.validate import (
    LIMITS,
    is_int,
    validate_buckets,
    validate_cache,
    validate_compile,
    validate_generate_args,
    validate_ids,
    validate_int,
    validate_limits,
    validate_model,
    validate_prompt,
    validate_use_graph,
    validate_windows,
)

# --- buckets (notebook 03) -----------------------------------------------------------------


def default_buckets(max_len: int, first: int = 128, growth: float = 2, limits=LIMITS):
    """first, first·growth, first·growth², ... below max_len, then max_len itself (each at
    least one more than the one before, at most limits.buckets of them)."""
    validate_int("max_len", max_len)
    validate_int("first bucket", first)
    if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not growth > 1:
        raise ValueError(f"growth must be a number > 1, got {growth!r}")
    out, b = [], first
    while b < max_len:
        out.append(b)
        if len(out) == validate_limits(limits).buckets:
            raise ValueError(
                f"growth {growth} from first bucket {first} gives more than {limits.buckets} "
                f"buckets below max_len {max_len}: grow faster or start larger"
            )
        b = max(b + 1, math.ceil(b * growth))
    return (*out, max_len)


def bucket_for(n_keys: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket that holds n_keys keys; buckets ascending, as default_buckets
    makes them."""
    validate_int("n_keys", n_keys)
    if not isinstance(buckets, (tuple, list)) or not buckets:
        raise ValueError(f"buckets must be a non-empty tuple of ints, got {buckets!r}")
    if any(not is_int(b) or b < 1 for b in buckets) or list(buckets) != sorted(set(buckets)):
        raise ValueError(f"buckets must be positive ints in ascending order, got {buckets!r}")
    for b in buckets:
        if b >= n_keys:
            return b
    raise ValueError(f"{n_keys} keys > largest bucket {buckets[-1]}")


def resolve_buckets(buckets, max_len: int) -> tuple[int, ...]:
    """The bucket list of a decoder of max_len positions: the buckets given, checked and
    sorted, or default_buckets(max_len) for None."""
    return default_buckets(max_len) if buckets is None else validate_buckets(buckets, max_len)


def bucket_windows(buckets, max_len: int) -> list[int]:
    """The window of the step that attends over n = 1..max_len keys (the step at position
    n - 1): the smallest bucket that holds n (buckets None: the default ones)."""
    buckets = resolve_buckets(buckets, max_len)
    return [bucket_for(n, buckets) for n in range(1, max_len + 1)]


def wasted_share(buckets, max_len: int) -> float:
    """Share of a whole max_len-token generation's attention work spent on masked keys:
    sum(window - n) / sum(window) over n = 1..max_len."""
    windows = bucket_windows(buckets, max_len)
    return sum(w - n for n, w in enumerate(windows, 1)) / sum(windows)


# --- compiled kernels (notebook 07) --------------------------------------------------------

# compile=True: the step's kernels come from torch.compile (Inductor fuses the elementwise
# chains into a few Triton kernels, "fused kernels") without CUDA graphs of its own, so the
# graphs are still ours: one per bucket, one shared pool. One compiled shape per window and
# batch size. Inductor's options: coordinate-descent tuning of each kernel's launch
# configuration, and Programmatic Dependent Launch (on Hopper GPUs a kernel may start while
# the one before finishes). A dict of torch.compile arguments replaces them: COMPILE_SHAPES
# | compile.
COMPILE_SHAPES = {"dynamic": False, "fullgraph": True}
COURSE_COMPILE = COMPILE_SHAPES | {
    "options": {"coordinate_descent_tuning": True, "triton.enable_pdl": True}
}


def compile_step(model: Transformer, compile):
    """The module that runs the step: the model itself (compile=False), or torch.compile of
    it with COURSE_COMPILE (compile=True) or with COMPILE_SHAPES | compile (a dict)."""
    if compile is False:
        return model
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is not None and limit < 64:
        torch._dynamo.config.recompile_limit = 64  # windows × batch sizes, each compiled once
    return torch.compile(model, **(COURSE_COMPILE if compile is True else COMPILE_SHAPES | compile))


# --- the decoders --------------------------------------------------------------------------


class Decoder:
    """What both decoders are: the static step on static buffers (a fixed cache and the
    input token `tok`), run eagerly or replayed from one graph per window, all in one memory
    pool. One construction and one step; GraphDecoder and SlotGraphDecoder differ only in
    the cache they decode. The pool is made at the first capture, so use_graph=False needs no
    CUDA."""

    def __init__(self, model: Transformer, cache, buckets, use_graph, compile, graph_api):
        device = validate_model(model)
        self.use_graph = validate_use_graph(use_graph, device, graph_api)
        validate_compile(compile, device)
        validate_cache(cache, model)
        self.buckets = resolve_buckets(buckets, cache.max_len)
        cfg = model.cfg
        cache.allocate(cfg.n_kv_heads, cfg.head_dim, activation_dtype(model))
        self.model, self.cache, self.graph_api = model, cache, graph_api
        self.tok = torch.zeros(cache.shape[0], 1, dtype=torch.long, device=device)
        self.step_model = compile_step(model, compile)
        self.graphs: dict[int, tuple] = {}  # window -> (graph, its static output logits)
        self.pool = None

    @torch.no_grad()
    def forward(self, window: int) -> Tensor:
        """The static step itself: one token per row from self.tok, over `window` keys."""
        with precision(self.model):
            logits, _ = self.step_model(self.tok, cache=self.cache.decoding(window), check=False)
        return logits

    def capture_window(self, window: int) -> tuple:
        """Record the step over `window` keys as a graph into the shared pool, and keep it
        (self.graphs[window]); returns (graph, static logits). Kept, not only returned: once
        every graph of a pool has been freed, PyTorch refuses the next capture into that pool
        (an internal assert in its caching allocator, hit on the H200 by a graph thrown away)."""
        api, cache = self.graph_api, self.cache
        if self.pool is None:
            self.pool = api.graph_pool_handle()
        # Warm up on a side stream: the first run of each op loads kernels and makes
        # workspaces, which must not happen during capture. The warm-up really runs the
        # step, so it moves the device positions: restore() puts the saved ones back.
        saved = cache.snapshot()
        try:
            side = api.Stream()
            side.wait_stream(api.current_stream())
            with api.stream(side):
                self.forward(window)
            api.current_stream().wait_stream(side)
        finally:
            cache.restore(saved)
        graph = api.CUDAGraph()
        with api.graph(graph, pool=self.pool):
            out = self.forward(window)  # recorded, not run: nothing moves until replay()
        self.graphs[window] = graph, out
        return graph, out

    @torch.no_grad()
    def capture(self, windows: tuple[int, ...] | None = None) -> float:
        """Capture graphs ahead of time (default: every bucket), so that no decode step pays
        for it. Largest first, as the serving engines do (the smaller graphs can reuse the
        memory the pool already holds). Returns the seconds it took."""
        windows = validate_windows(windows, self.buckets)
        validate_use_graph(True, self.tok.device, self.graph_api)
        self.validate_room()
        t0 = time.perf_counter()
        for w in sorted(windows, reverse=True):
            if w not in self.graphs:
                self.capture_window(w)
        self.graph_api.synchronize()
        return time.perf_counter() - t0

    def replay(self, window: int) -> Tensor:
        """One decode step over `window` keys: its graph replayed, or (use_graph=False) the
        same step run eagerly. The host positions are the caller's to advance."""
        if not self.use_graph:
            return self.forward(window)
        graph, out = self.graphs[window]
        graph.replay()
        return out

    @torch.no_grad()
    def step(self, tok: Tensor, check: bool = True) -> Tensor:
        """tok (rows, 1) → logits (rows, 1, V). With graphs, the result is a static buffer
        that the next step overwrites: read it (or sample from it) first. check=False skips
        the checks of tok (a device read), for tokens the caller sampled itself."""
        if check:
            self.validate_step(tok)
        window = self.window()
        if self.use_graph and window not in self.graphs:
            self.capture_window(window)  # the first step over this window records its graph
        self.tok.copy_(tok)  # into the static input
        with self.cache.transaction():  # if the step does not finish, the positions go back
            out = self.replay(window)
            self.cache.advance_host()  # the step moved the device positions; the host follows
        return out

    def window(self) -> int:
        """The window of the next step: the smallest bucket that holds its keys, picked on
        the host, with no device read. An error, never a write, past max_len."""
        self.validate_room()
        n_keys = self.cache.keys_needed()
        return next(b for b in self.buckets if b >= n_keys)

    def validate_step(self, tok: Tensor) -> None:
        """tok must be ids in the vocabulary, one per row of the static input."""
        validate_ids(tok, self.model.cfg.vocab_size, self.tok.device, name="tok")
        if tok.shape != self.tok.shape:
            raise ValueError(f"tok must have shape {tuple(self.tok.shape)}, got {tuple(tok.shape)}")

    def validate_room(self) -> None:
        n_keys, max_len = self.cache.keys_needed(), self.cache.max_len
        if n_keys > max_len:
            raise ValueError(
                f"KV cache full: the next step needs {n_keys} keys > max_len {max_len}"
            )


class GraphDecoder(Decoder):
    """Prefill eagerly, then decode one token per row with one CUDA-graph replay per step.

    Reusable: prefill() resets the cache, and graphs captured for one request serve the
    next (same batch size). use_graph=False runs the identical static step eagerly, on any
    device: the reference that replay must match bit for bit. compile: False, True, or a
    dict of torch.compile arguments (notebook 07).
    """

    def __init__(self, model: Transformer, batch: int, max_len: int | None = None,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 compile=False, graph_api=torch.cuda, limits=LIMITS):  # fmt: skip
        device = validate_model(model)
        max_len = model.cfg.max_seq_len if max_len is None else max_len
        validate_int("max_len", max_len, hi=model.cfg.max_seq_len)
        cache = StaticKVCache(model.cfg.n_layers, batch, max_len, device, limits)
        super().__init__(model, cache, buckets, use_graph, compile, graph_api)
        self.prefilled = False

    @property
    def batch(self) -> int:
        return self.cache.batch

    @property
    def max_len(self) -> int:
        return self.cache.max_len

    @torch.no_grad()
    def prefill(self, idx: Tensor, pad_lens: Tensor | None = None) -> Tensor:
        """idx (B, T), left-padded by pad_lens (B,) if given. Returns logits (B, T, V)."""
        validate_prompt(idx, self.model, 0, pad_lens, self.max_len)
        if idx.shape[0] != self.batch:
            raise ValueError(f"batch {idx.shape[0]} != decoder batch {self.batch}")
        self.prefilled = False  # until this prefill has finished
        self.cache.reset(pad_lens)
        with precision(self.model):
            logits, _ = self.model(idx, cache=self.cache.prefilling(), check=False)
        self.prefilled = True
        return logits

    def validate_step(self, tok: Tensor) -> None:
        super().validate_step(tok)
        if not self.prefilled:
            raise ValueError("call prefill(idx) before step(tok)")

    @torch.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, *, pad_lens: Tensor | None = None,
                 temperature: float = 0.0, top_k: int | None = None, seed: int | None = None,
                 eos_id: int | None = None) -> Tensor:  # fmt: skip
        """As generation.generate, with the static step (and its graphs) for decode."""
        vocab_size = self.model.cfg.vocab_size
        validate_generate_args(max_new_tokens, temperature, top_k, vocab_size, seed, eos_id)
        validate_prompt(idx, self.model, max_new_tokens, pad_lens, self.max_len)
        logits = self.prefill(idx, pad_lens)
        return decode_n_tokens(
            logits, lambda tok: self.step(tok, check=False), max_new_tokens,
            temperature=temperature, top_k=top_k, seed=seed, eos_id=eos_id,
        )  # fmt: skip


class SlotGraphDecoder(Decoder):
    """The continuous engine's decode step (one token per SlotKVCache slot) as CUDA graphs
    (notebook 06). Admission, release and prefill stay eager in the engine.

    Why it can be a graph: the batch is always n_slots rows (free slots compute too), and
    slot lengths and active flags live in fixed device tensors that prefill and release
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
                 compile=False, graph_api=torch.cuda):  # fmt: skip
        if not isinstance(slots, SlotKVCache):
            raise ValueError(f"SlotGraphDecoder decodes a SlotKVCache, got {type(slots).__name__}")
        super().__init__(model, slots, buckets, use_graph, compile, graph_api)
