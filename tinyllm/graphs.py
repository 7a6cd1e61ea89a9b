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
from collections.abc import Mapping

import torch
from torch import Tensor

from tinyllm.generation import decode_n_tokens, prompt_lens
from tinyllm.kv_cache import SlotKVCache, StaticKVCache
from tinyllm.model import Transformer
from tinyllm.paged import PagedKVCache
from tinyllm.precision import activation_dtype, precision
from tinyllm.validate import (
    LIMITS,
    is_int,
    validate_buckets,
    validate_cache,
    validate_capture_sizes,
    validate_generate_args,
    validate_graph_args,
    validate_ids,
    validate_int,
    validate_keys,
    validate_limits,
    validate_model,
    validate_prompt,
    validate_use_graph,
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
# The paged engine's compile=True: the same, with the batch left dynamic (torch.compile's
# dynamic=None). The first capture size is compiled as it is, then one compile with a symbolic
# batch serves every other size but 1 (torch specialises sizes 0 and 1). vLLM compiles its step
# once, dynamic on the number of tokens, then captures a graph per size. With one compile per
# size, capture() at 256 rows (35 sizes) had not ended after 540 s on an H200
# (results/gpu_checks/2026-12-02_89cb862); with this one, it took 57 s, three compiles
# (results/gpu_checks/2026-12-02_513818f); later 32 s and seven compiles
# (results/h200_engine_scale.json), after the step took the hand-written path at up to
# GEMV_ROWS rows, whose attention's splits follow the batch: the likely cause, not measured.
ENGINE_COMPILE = COURSE_COMPILE | {"dynamic": None}


def compile_step(model: Transformer, compile):
    """The module that runs the step: the model itself (compile=False), or torch.compile of
    it with COURSE_COMPILE (compile=True) or with COMPILE_SHAPES | compile (a dict)."""
    if compile is False:
        return model
    limit = getattr(torch._dynamo.config, "recompile_limit", None)
    if limit is not None and limit < 64:
        torch._dynamo.config.recompile_limit = 64  # windows × batch sizes, each compiled once
    return torch.compile(model, **(COURSE_COMPILE if compile is True else COMPILE_SHAPES | compile))


# --- the one capture recipe ----------------------------------------------------------------


class Graphs(Mapping):
    """One CUDA graph per key, each with its static output, all in one memory pool: the
    capture recipe of notebook 04, written once. A decoder keeps its decode step's graphs in
    one (the key is its window or capture size); the paged engine keeps its decode and its
    prefill graphs in two that share a pool (share=). Read like a dict: key in graphs,
    graphs[key] -> (graph, output), sorted(graphs), graphs.values() (a Mapping).

    capture(key, forward, state) records forward(key), a static step on fixed buffers:
    first run once on a side stream (its first run loads kernels and makes workspaces,
    which must not happen during capture), then, with what that run changed put back
    (state.snapshot() / state.restore()), recorded into the pool. The graph is kept, not
    only returned: once every graph of a pool has been freed, PyTorch refuses the next
    capture into it (an internal assert in its caching allocator, hit on the H200)."""

    def __init__(self, graph_api, share: "Graphs | None" = None):
        self.api, self.share, self.own_pool = graph_api, share, None
        self.graphs: dict = {}
        self.events: list | None = None  # record_events(): (start, end) of every replay

    @property
    def pool(self):
        """The memory pool, made at the first capture (so use_graph=False needs no CUDA)."""
        if self.share is not None:
            return self.share.pool
        if self.own_pool is None:
            self.own_pool = self.api.graph_pool_handle()
        return self.own_pool

    def capture(self, key, forward, state) -> tuple:
        api = self.api
        saved = state.snapshot()
        try:
            side = api.Stream()
            side.wait_stream(api.current_stream())
            with api.stream(side):
                forward(key)  # the warm-up runs the step: what it changes goes back below
            api.current_stream().wait_stream(side)
        finally:
            state.restore(saved)
        graph = api.CUDAGraph()
        with api.graph(graph, pool=self.pool):
            out = forward(key)  # recorded, not run: nothing moves until replay()
        self.graphs[key] = graph, out
        return graph, out

    def replay(self, key):
        """One replay of key's graph; returns its static output, which the next replay
        overwrites."""
        graph, out = self.graphs[key]
        if self.events is None:
            graph.replay()
        else:  # a measurement asked for it: the replay between two CUDA events
            start, end = self.api.Event(enable_timing=True), self.api.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            self.events.append((start, end))
        return out

    def record_events(self, events: list | None) -> None:
        """From now on, bracket every replay with two CUDA events, appended to `events` as
        (start, end) (None: stop). How busy replays keep the GPU, without the profiler."""
        self.events = events

    def __contains__(self, key) -> bool:
        return key in self.graphs

    def __getitem__(self, key) -> tuple:
        return self.graphs[key]

    def __iter__(self):
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)


# --- the decoders --------------------------------------------------------------------------


class Decoder:
    """What every decoder is: the static step on static buffers (a fixed cache and the input
    token `tok`), run eagerly or replayed from one graph per *graph key* (Graphs). The key
    is what the step's shapes depend on: its window (a bucket) for the static and the slot
    cache, its capture size (the rows it runs) for the paged one; graph_keys is the list of
    them (the buckets, or the capture sizes). One construction and one step; GraphDecoder
    and SlotGraphDecoder differ only in the cache they decode."""

    def __init__(self, model: Transformer, cache, graph_keys, use_graph: bool, compile,
                 graph_api):  # fmt: skip
        """From what the subclass's door checked (validate_graph_args, the cache, its keys)."""
        device = validate_model(model)
        self.use_graph, self.graph_keys = use_graph, graph_keys
        cfg = model.cfg
        cache.allocate(cfg.n_kv_heads, cfg.head_dim, activation_dtype(model))
        self.model, self.cache, self.graph_api = model, cache, graph_api
        if isinstance(cache, PagedKVCache):  # the paged cache's rows hold the input ids
            self.tok = cache.rows.tok
        else:
            self.tok = torch.zeros(cache.shape[0], 1, dtype=torch.long, device=device)
        self.step_model = compile_step(model, compile)
        self.graphs = Graphs(graph_api)

    @torch.no_grad()
    def forward(self, key: int) -> Tensor:
        """The static step itself: one token per row from self.tok, for graph key `key`."""
        step = self.cache.decoding(key)
        with precision(self.model):
            logits, _ = self.step_model(self.tok[: step.rows], cache=step, check=False)
        return logits

    def snapshot(self) -> tuple:
        """What a step changes, for capture's warm-up to put back: the cache's positions and
        the input ids."""
        return self.cache.snapshot(), self.tok.clone()

    def restore(self, saved: tuple) -> None:
        positions, tok = saved
        self.cache.restore(positions)
        self.tok.copy_(tok)

    @property
    def pool(self):
        """The memory pool its graphs share: None before the first capture."""
        return self.graphs.own_pool

    def capture_graph(self, key) -> tuple:
        """Record the step of graph key `key` into the decoder's Graphs; (graph, logits)."""
        return self.graphs.capture(key, self.forward, self)

    @torch.no_grad()
    def capture(self, keys: tuple[int, ...] | None = None) -> float:
        """Capture graphs ahead of time (default: one per graph key), so that no decode step
        pays for it. Largest first, as the serving engines do (the smaller graphs can reuse
        the memory the pool already holds). Returns the seconds it took."""
        keys = validate_keys(keys, self.graph_keys)
        validate_use_graph(True, self.tok.device, self.graph_api)
        self.validate_room()
        t0 = time.perf_counter()
        for key in sorted(keys, reverse=True):
            if key not in self.graphs:
                self.capture_graph(key)
        self.graph_api.synchronize()
        return time.perf_counter() - t0

    def replay(self, key: int) -> Tensor:
        """One decode step of graph key `key`: its graph replayed, or (use_graph=False) the
        same step run eagerly. The host positions are the caller's to advance."""
        if not self.use_graph:
            return self.forward(key)
        return self.graphs.replay(key)

    @torch.no_grad()
    def step(self, tok: Tensor | None, check: bool = True) -> Tensor:
        """tok (rows, 1) → logits (rows, 1, V) (the first rows only, for a paged cache's
        capture size). With graphs, the result is a static buffer that the next step
        overwrites: read it (or sample from it) first. check=False skips the checks of tok
        (a device read), for tokens the caller sampled itself; tok=None steps on what
        self.tok holds."""
        if check and tok is not None:
            self.validate_step(tok)
        key = self.graph_key()
        if self.use_graph and key not in self.graphs:
            self.capture_graph(key)  # the first step of this key records its graph
        if tok is not None:
            self.tok[: tok.shape[0]].copy_(tok)  # into the static input
        with self.cache.transaction():  # if the step does not finish, the positions go back
            self.cache.grow()  # the paged cache hands out the blocks the step will write
            out = self.replay(key)
            self.cache.advance_host()  # the step moved the device positions; the host follows
        return out

    def graph_key(self) -> int:
        """The next step's graph key (window or capture size), picked on the host, with no
        device read. An error, never a write, past max_len."""
        self.validate_room()
        return self.cache.graph_key(self.graph_keys)

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


def default_capture_sizes(n_rows: int) -> tuple[int, ...]:
    """1, 2, 4, 8, then steps of 8 up to n_rows, and n_rows itself (as vLLM and SGLang
    list theirs)."""
    sizes = [c for c in (1, 2, 4) if c < n_rows] + list(range(8, n_rows, 8))
    return (*sizes, n_rows)


def resolve_capture_sizes(capture_sizes, n_rows: int) -> tuple[int, ...]:
    validate_int("n_rows", n_rows)
    if capture_sizes is None:
        return default_capture_sizes(n_rows)
    return validate_capture_sizes(capture_sizes, n_rows)


def decode_cache(kind: str, model: Transformer, rows: int, max_len: int, limits, buckets,
                 capture_sizes):  # fmt: skip
    """The cache a decoder of `rows` rows decodes (kv "static", "slots" or "paged") and its
    graph keys: buckets for the windowed caches, capture sizes for the paged one."""
    cfg, device = model.cfg, validate_model(model)
    if kind == "paged":
        if buckets is not None:
            raise ValueError("buckets are windows of kv='static' and kv='slots'; a paged "
                             "step needs none (capture_sizes picks its graphs)")  # fmt: skip
        keys = resolve_capture_sizes(capture_sizes, rows)
        return PagedKVCache(cfg.n_layers, rows, max_len, device, limits=limits), keys
    if capture_sizes is not None:
        raise ValueError(f"capture_sizes are for kv='paged', not kv={kind!r} (its graphs "
                         f"are one per bucket)")  # fmt: skip
    keys = resolve_buckets(buckets, max_len)
    make = {"static": StaticKVCache, "slots": SlotKVCache}[kind]
    return make(cfg.n_layers, rows, max_len, device, limits), keys


class GraphDecoder(Decoder):
    """Prefill eagerly, then decode one token per row with one CUDA-graph replay per step.

    kv="static": the windowed StaticKVCache, one graph per bucket (notebooks 02-05);
    kv="paged": a PagedKVCache, one graph for the batch, valid at every length (notebook 08).
    Reusable: prefill() resets the cache, and graphs captured for one request serve the
    next (same batch size). use_graph=False runs the identical static step eagerly, on any
    device: the reference that replay must match bit for bit. compile: False, True, or a
    dict of torch.compile arguments (notebook 07).
    """

    def __init__(self, model: Transformer, batch: int, max_len: int | None = None,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 compile=False, graph_api=torch.cuda, kv: str = "static",
                 capture_sizes: tuple[int, ...] | None = None, limits=LIMITS):  # fmt: skip
        use_graph = validate_graph_args(model, use_graph, compile, graph_api)
        max_len = model.cfg.max_seq_len if max_len is None else max_len
        validate_int("max_len", max_len, hi=model.cfg.max_seq_len)
        if kv not in ("static", "paged"):
            raise ValueError(f"kv must be 'static' or 'paged', got {kv!r}")
        if kv == "paged" and capture_sizes not in (None, (batch,)):
            raise ValueError(f"a GraphDecoder runs all its {batch} rows: its one capture size "
                             f"is its batch, got capture_sizes={capture_sizes!r}")  # fmt: skip
        sizes = None if kv == "static" else (batch,)
        cache, keys = decode_cache(kv, model, batch, max_len, limits, buckets, sizes)
        super().__init__(model, cache, keys, use_graph, compile, graph_api)
        self.kv = kv
        self.buckets = keys if kv == "static" else None
        self.prefilled = False

    @property
    def batch(self) -> int:
        return self.cache.shape[0]

    @property
    def max_len(self) -> int:
        return self.cache.max_len

    @torch.no_grad()
    def prefill(self, idx: Tensor, pad_lens: Tensor | None = None) -> Tensor:
        """idx (B, T), left-padded by pad_lens (B,) if given (kv="static" only: a paged row
        has a length of its own). Returns logits (B, T, V)."""
        validate_prompt(idx, self.model, 0, pad_lens, self.max_len)
        if idx.shape[0] != self.batch:
            raise ValueError(f"batch {idx.shape[0]} != decoder batch {self.batch}")
        if pad_lens is not None and self.kv == "paged":
            raise ValueError(
                "pad_lens are for kv='static': with pages each row has its own length, so "
                "prefill rows of one length, or use the engine"
            )
        self.prefilled = False  # until this prefill has finished
        if self.kv == "paged":  # every row: its blocks, the prompts' K/V, then the rows held
            rows, lens, paged = list(range(self.batch)), [idx.shape[1]] * self.batch, self.cache
            paged.rows.release(rows)
            paged.rows.take(rows, lens)
            with precision(self.model):
                logits, _ = self.model(idx, cache=paged.fill(rows, lens), check=False)
            paged.rows.admit(rows, lens)
        else:
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
            prompt_lens=prompt_lens(idx, pad_lens), temperature=temperature, top_k=top_k,
            seed=seed, eos_id=eos_id,
        )  # fmt: skip


class SlotGraphDecoder(Decoder):
    """The slot engine's decode step, one token per slot, as CUDA graphs (notebook 06).
    Admission, release and prefill stay eager in the engine.

    The batch is always n_slots rows (free slots compute too); slot lengths and active flags
    live in fixed device tensors that prefill and release update in place, and the one
    changing shape is the attention window: a graph per bucket, the smallest that holds the
    longest slot + 1, with keys past each slot's length masked. The step advances the
    device lengths; the host lengths follow in advance_host(), after the step, replayed or
    eager. use_graph=False runs the identical step eagerly, the reference that replay must
    match bit for bit. (The paged engine of notebooks 08-09 keeps its own graphs:
    serve.PagedEngine.)
    """

    def __init__(self, model: Transformer, slots: SlotKVCache,
                 buckets: tuple[int, ...] | None = None, use_graph: bool = True,
                 compile=False, graph_api=torch.cuda):  # fmt: skip
        if not isinstance(slots, SlotKVCache):
            raise ValueError(f"SlotGraphDecoder decodes a SlotKVCache, got {type(slots).__name__} "
                             f"(a PagedKVCache is serve.PagedEngine's)")  # fmt: skip
        use_graph = validate_graph_args(model, use_graph, compile, graph_api)
        validate_cache(slots, model)
        self.buckets = resolve_buckets(buckets, slots.max_len)
        super().__init__(model, slots, self.buckets, use_graph, compile, graph_api)
