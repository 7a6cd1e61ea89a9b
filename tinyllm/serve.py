"""The paged engine: continuous batching around one CUDA graph per capture size (notebooks
08 to 10).

What it adds to the slot engine of notebook 06, each measured in notebook 09 or 10:

- the paged cache (notebook 08): the requests are kept in the first rows, and each decode
  step replays the graph of the smallest capture size that holds them, valid at every length;
- prefill in batches: the requests admitted together are prefilled together, replayed from
  a graph per bucket of (rows, positions) when their prompts fit one chunk, else eagerly in
  chunks of prefill_chunk positions;
- sampling on the device, inside each graph, keyed by (seed, position) (generation.sample);
- the ids read one step late: step t reads the ids the turns before it sampled, from
  rows.tok; they are copied to the host, step t is launched, then they are handed to their
  requests. overlap=True does that while the GPU runs step t;
- every graph captured before serving (capture()): run() captures them first if needed, and
  no graph is captured while serving.

A step reads like nano-vllm's three lines: the rows that cross into a new block grow, the
graph replays, then the ids it read are handed out and the finished rows released. Their
holes go to the next admission first; the next step moves the last requests into what is
left, so a request moves only when no new one takes its place.
Rows (rows.py) owns every input a step reads for each row, on the device and on the host,
and its changes are vectorised: the host's work per step does not grow with the rows, but for
handing each request its token.

    engine = PagedEngine(model, n_rows=32)
    engine.capture()                                   # every graph, before serving
    rid = engine.submit(tokenizer.encode("The for statement"), max_new_tokens=50)
    out = engine.run()[rid]
"""

import time

import numpy as np
import torch
from tqdm import tqdm

from tinyllm.engine import Serving
from tinyllm.generation import prefill, sample
from tinyllm.graphs import (
    ENGINE_COMPILE,
    Graphs,
    bucket_for,
    compile_step,
    default_buckets,
    resolve_capture_sizes,
)
from tinyllm.model import Transformer
from tinyllm.paged import PagedKVCache
from tinyllm.precision import activation_dtype, precision
from tinyllm.rows import ACTIVE, LEN, SEED, TABLE, TEMPERATURE, TOP_K, Download, Upload, to_device
from tinyllm.validate import (
    LIMITS,
    signals_held,
    validate_bool,
    validate_graph_args,
    validate_int,
    validate_limits,
    validate_model,
    validate_use_graph,
)

PREFILL_CHUNK = 512  # positions of each prompt per prefill forward


class Sections:
    """The host's time in each section of a turn (time.perf_counter), beside the recipe:
    `with sections("launch"):` adds the block's seconds to sections.seconds["launch"]."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.t0 = time.perf_counter()

    def __call__(self, name: str) -> "Sections":
        self.name = name
        return self

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.seconds[self.name] = self.seconds.get(self.name, 0.0) + (
            time.perf_counter() - self.start
        )


class PagedEngine(Serving):
    """Continuous batching over n_rows rows of a PagedKVCache, every step a graph replay.
    submit() queues a request, run() serves them all; capture() records every graph first.
    step() is its turn: it admits what fits, then decodes (admit() alone is a turn too). Each
    forward and sampling call is shared by the turn's requests, so any failure in a turn is
    the turn's, undone whole.

    prefill_graphs=False prefills eagerly, in chunks; overlap=True reads each step's ids
    while the GPU runs the next one (the same schedule and tokens as overlap=False);
    use_graph=None means graphs when the model is on CUDA; compile=True compiles the step with
    the course's Inductor settings, the batch dynamic, so that a few compiles serve every
    capture size (graphs.ENGINE_COMPILE); a dict of torch.compile arguments as the decoders'.

    min_admit: while requests wait, an admission waits for this many free rows, or for as
    many as wait (default n_rows // 16, at least 1). Each admission replays a prefill
    graph, whose GPU time grows little with its prompts (notebook 10's recording: 389 µs
    for about 2 prompts, 474 µs for about 19, at 256 rows on an H200): fewer, larger
    admissions cost the GPU and the host less, for a few rows idle a few steps. Hugging
    Face's text-generation-inference router waits the same way (waiting_served_ratio)."""

    def __init__(self, model: Transformer, n_rows: int, max_len: int | None = None, *,
                 capture_sizes: tuple[int, ...] | None = None,
                 prefill_chunk: int = PREFILL_CHUNK, prefill_graphs: bool = True,
                 overlap: bool = False, use_graph: bool | None = None, compile=False,
                 graph_api=torch.cuda, eos_id: int | None = None, min_admit: int | None = None,
                 limits=LIMITS):  # fmt: skip
        device, cfg = validate_model(model), model.cfg
        max_len = cfg.max_seq_len if max_len is None else max_len
        validate_int("max_len", max_len, lo=2, hi=cfg.max_seq_len)
        validate_int("n_rows", n_rows, hi=validate_limits(limits).rows)
        validate_int("prefill_chunk", prefill_chunk, hi=validate_limits(limits).seq_len)
        validate_bool("prefill_graphs", prefill_graphs)
        validate_bool("overlap", overlap)
        min_admit = max(1, n_rows // 16) if min_admit is None else min_admit
        validate_int("min_admit", min_admit, hi=n_rows)
        self.use_graph = validate_graph_args(model, use_graph, compile, graph_api)
        self.capture_sizes = resolve_capture_sizes(capture_sizes, n_rows)
        super().__init__(model, max_len, eos_id)
        self.device, self.graph_api, self.n_rows = device, graph_api, n_rows
        self.prefill_chunk, self.overlap, self.min_admit = prefill_chunk, overlap, min_admit
        self.cache = PagedKVCache(cfg.n_layers, n_rows, max_len, device, limits=limits)
        self.cache.allocate(cfg.n_kv_heads, cfg.head_dim, activation_dtype(model))
        self.rows = self.cache.rows
        self.size_for = [next(c for c in self.capture_sizes if c >= max(n, 1))
                         for n in range(n_rows + 1)]  # fmt: skip
        self.step_model = compile_step(model, ENGINE_COMPILE if compile is True else compile)
        self.decode_graphs = Graphs(graph_api)
        self.fill_graphs = Graphs(graph_api, share=self.decode_graphs) if prefill_graphs else None
        # a prefill graph's fixed inputs, for the buckets (rows, positions), in one upload: the
        # ids, then each prompt's row of state (rows.py: length, active, top-k, seed,
        # temperature, table), then each row's prompt (-1: none)
        positions = min(prefill_chunk, max_len)
        self.row_buckets = default_buckets(n_rows, first=1)
        self.len_buckets = default_buckets(positions, first=min(16, positions))
        self.row_bucket_for = [bucket_for(max(n, 1), self.row_buckets) for n in range(n_rows + 1)]
        self.len_bucket_for = [bucket_for(max(t, 1), self.len_buckets)
                               for t in range(positions + 1)]  # fmt: skip
        width = self.rows.state.shape[1]
        self.fill_ints = torch.zeros(n_rows * (positions + width + 1), dtype=torch.long,
                                     device=device)  # fmt: skip
        self.upload_fill = Upload(self.fill_ints)
        self.download = Download(n_rows, device)  # each step's ids, to the host
        # each row's request's ids so far, its first rows.host.n_out[row] entries; those past
        # them are stale, so an undone turn leaves nothing to take back here
        self.out_ids = np.zeros((n_rows, max_len), np.int64)
        self.capture_s: float | None = None  # capture()'s seconds, once it has run

    # --- serving --------------------------------------------------------------------------

    def run(self) -> dict[int, list[int]]:
        """Serve every queued request; returns {request id: generated ids (EOS included)} for
        every request finished since the last run() returned. With graphs, capture() runs
        first if it has not: never while serving."""
        self.captured()
        with signals_held:  # held once for the run; each turn's own hold nests inside it
            while self.n_waiting() or self.rows.active.any():
                self.step()
                signals_held.deliver()  # a Ctrl-C or a timer that came during a turn: here
        return self.hand_back()

    @torch.no_grad()
    def admit(self) -> None:
        """As many queued requests as there are free rows, once min_admit rows are free (or
        as many as wait), prefilled together into the lowest free rows, their first ids
        sampled into the next step's input (rows.tok).
        The host reads those ids with the next step's. Each step() admits first, inside its
        own turn; called alone, admit() is a turn of its own."""
        self.captured()
        t0, waiting = time.perf_counter(), self.n_waiting()
        while self.n_waiting():
            free = self.rows.free_rows()
            if len(free) < min(self.n_waiting(), self.min_admit):
                break  # too few rows free yet: fewer, larger admissions
            reqs = self.waiting[self.head : self.head + len(free)]
            rows = free[: len(reqs)]
            with self.transaction(self.cache, sync=False):  # rows.settle(): no flush
                self.head += len(reqs)
                longest = max(len(req.prompt) for req in reqs)
                if self.fill_graphs is not None and longest <= self.prefill_chunk:
                    self.prefill_replayed(rows, reqs)
                else:
                    self.prefill_eagerly(rows, reqs)
        if self.n_waiting() < waiting:
            self.admissions.append({"t0": t0, "n": waiting - self.n_waiting(),
                                    "admit_s": time.perf_counter() - t0})  # fmt: skip

    @torch.no_grad()
    def step(self) -> None:
        """One turn: the queued requests that fit are admitted, then decode step t runs for
        the rows in use. It reads each row's id from rows.tok, where the turns before it
        sampled them, and samples the next id into the same place. The ids it reads are
        copied to the host first, then its graph is launched. The host hands them to their
        requests while the GPU runs step t (overlap=True), or after it (overlap=False). The
        requests that finish leave; the next step compacts the rest. A request that finishes
        here ran in step t too: that token is dropped."""
        self.captured()
        with self.transaction(self.cache, sync=False):  # the step flushes before its replay
            self.admit()  # the queued requests that fit, first: one turn with the step
            t = Sections()
            src, dst = self.rows.compaction()  # the holes admissions left: the last rows in
            if len(src):
                self.rows.move(src, dst, check=False)
                self.out_ids[dst] = self.out_ids[src]  # their ids so far go with them
            n = self.rows.in_use()
            if n == 0:
                return
            key = self.size_for[n]
            rids = self.rows.host.rid[:key].copy()
            t_launch = time.perf_counter()
            with t("launch"):
                self.rows.grow()  # the rows about to cross into a new block take one
                self.rows.flush()  # every row changed since the last step, one upload
                ids, copied = self.download(self.rows.tok[:key, 0])  # the ids step t reads
                self.replay(key)  # K/V written, each row's next id sampled into rows.tok
                self.rows.advance_host()
                stepped = copied if self.overlap else self.record()
            with t("read ids"):
                if stepped is not None:
                    stepped.synchronize()
            self.release(self.hand_out(ids.numpy()))
        self.stats.append({"step": len(self.stats), "capture_size": key,
                           "rows": rids, "n_active": int((rids >= 0).sum()),
                           "t0": t.t0, "t_launch": t_launch, "launch_s": t.seconds["launch"],
                           "read_s": t.seconds["read ids"],
                           "step_s": time.perf_counter() - t.t0})  # fmt: skip

    def hand_out(self, ids: np.ndarray) -> np.ndarray:
        """Rows 0..k-1 take the k ids a step read, vectorised with numpy: row r's id goes
        into its row of out_ids at its count (rows.host.n_out), and its count of ids left
        (rows.host.left) counts down, to 0 at eos_id. A free row's id lands past its count,
        where nothing reads it. Returns the rows whose requests finish now."""
        h, k = self.rows.host, len(ids)
        active = h.state[:k, ACTIVE]
        self.out_ids[np.arange(k), h.n_out[:k]] = ids
        h.n_out[:k] += active
        h.left[:k] -= active
        if self.eos_id is not None:
            h.left[:k][ids == self.eos_id] = 0
        return np.flatnonzero(active & (h.left[:k] == 0))

    def release(self, finished: np.ndarray) -> None:
        """The finished requests take their ids, as lists, and their rows are freed
        (rows.release, vectorised). The holes they leave are the lowest free rows: the next
        admission fills them first, and the next step moves the last requests into what is
        left (rows.move), so a step runs rows 0..n-1 and a request moves only when no new one
        takes its place."""
        if len(finished):
            h = self.rows.host
            rids = h.rid[finished].tolist()
            for rid, row, n in zip(rids, finished.tolist(), h.n_out[finished].tolist()):
                self.requests[rid].out = self.out_ids[row, :n].tolist()
            self.finished += rids
            self.rows.release(finished, check=False)

    def record(self):
        """An event recorded on the device's stream now: its synchronize() waits for the work
        queued before it. None on a CPU. torch.Event finds the current stream in C++, where
        torch.cuda.Event asks Python for it."""
        if self.device.type != "cuda":
            return None
        event = torch.Event(self.device)
        event.record()
        return event

    # --- the decode step ------------------------------------------------------------------

    def replay(self, key: int) -> None:
        """The decode step of capture size `key`: its graph replayed, or (use_graph=False)
        the same step run eagerly."""
        if self.use_graph:
            self.decode_graphs.replay(key)
        else:
            self.decode(key)

    @torch.no_grad()
    def decode(self, key: int) -> torch.Tensor:
        """The static decode step of rows 0..key-1: each writes its K/V, then samples its next
        id at the position it just filled, into rows.tok (the next step's input)."""
        r = self.rows
        with precision(self.model):
            logits, _ = self.step_model(r.tok[:key], cache=self.cache.decoding(key), check=False)
        position = r.lens_dev[:key].long()  # advanced by the step: the token being drawn
        ids = sample(logits[:, -1], r.temperature[:key], r.top_k[:key], r.seed[:key], position)
        r.tok[:key, 0].copy_(ids)
        return ids

    # --- prefill --------------------------------------------------------------------------

    def prefill_replayed(self, rows: np.ndarray, reqs) -> None:
        """Admit reqs[b] into free row rows[b] with one replay of the prefill graph of their
        bucket: blocks taken and the rows admitted on the host, one upload into the fixed
        buffer, one replay (or the same forward eagerly), which sets the rows on the device
        and samples their first ids into rows.tok."""
        n, lens = len(reqs), np.array([len(req.prompt) for req in reqs])
        self.rows.take(rows, lens, check=False)  # checked at submit, and free rows
        self.rows.admit(rows, lens, [req.temperature for req in reqs],
                        [req.top_k or 0 for req in reqs], [req.seed for req in reqs],
                        [req.rid for req in reqs], [req.max_new_tokens for req in reqs],
                        upload=False, check=False)  # fmt: skip
        R, T = self.row_bucket_for[n], self.len_bucket_for[lens.max()]
        ids = np.zeros((R, T), np.int64)
        for b, req in enumerate(reqs):
            ids[b, : lens[b]] = req.prompt
        state = np.zeros((R, self.rows.state.shape[1]), np.int64)  # a pad prompt: all 0
        state[:n] = self.rows.host.state[rows]
        src = np.full(self.n_rows, -1, np.int64)
        src[rows] = np.arange(n)
        self.upload_fill(np.concatenate([ids.ravel(), state.ravel(), src]))
        if self.use_graph:
            self.fill_graphs.replay((R, T))
        else:
            self.fill((R, T))

    @torch.no_grad()
    def fill(self, key: tuple[int, int]) -> torch.Tensor:
        """The static prefill of bucket key = (R, T) from the fixed buffer: K/V into the
        prompts' blocks, each prompt's first id sampled at its last position, and each
        admitted row's state and next id set on the device (torch.where over every row: a
        graph has no branch per admission). Returns the first ids (R,) (a pad prompt's is
        ignored)."""
        (R, T), r = key, self.rows
        F = r.state.shape[1]
        ids = self.fill_ints[: R * T].view(R, T)
        state = self.fill_ints[R * T : R * T + R * F].view(R, F)  # each prompt's row of state
        src = self.fill_ints[R * T + R * F :][: self.n_rows]  # each row's prompt, -1: none
        count, table = state[:, LEN], state[:, TABLE:]
        with precision(self.model):
            logits, _ = self.model(ids, cache=self.cache.filling(table, count), check=False)
        last = logits[torch.arange(R, device=ids.device), (count - 1).clamp(min=0)]
        temperature = state[:, TEMPERATURE].view(torch.float64)
        first = sample(last, temperature, state[:, TOP_K], state[:, SEED], count)  # at count
        take, b = src >= 0, src.clamp(min=0)
        r.tok[:, 0].copy_(torch.where(take, first[b], r.tok[:, 0]))
        r.state.copy_(torch.where(take[:, None], state[b], r.state))
        return first

    def prefill_eagerly(self, rows: np.ndarray, reqs) -> None:
        """What a prefill graph does, eagerly and in chunks: blocks taken, the prompts
        prefilled (prefill_batch), the rows admitted (their tables and sampling arguments
        uploaded), the first ids sampled into the next step's input."""
        lens = [len(req.prompt) for req in reqs]
        self.rows.take(rows, lens)
        last = self.prefill_batch(rows, [req.prompt for req in reqs])
        self.rows.admit(rows, lens, [req.temperature for req in reqs],
                        [req.top_k or 0 for req in reqs], [req.seed for req in reqs],
                        [req.rid for req in reqs],
                        [req.max_new_tokens for req in reqs])  # fmt: skip
        r, at = self.rows, to_device(rows, self.device)
        r.tok[at, 0] = sample(last, r.temperature[at], r.top_k[at], r.seed[at],
                              to_device(lens, self.device))  # fmt: skip

    def prefill_batch(self, rows: np.ndarray, prompts: list[list[int]]) -> torch.Tensor:
        """Prefill the prompts into their rows together, one forward per chunk: chunk j holds
        positions j·C..(j+1)·C-1 (C = prefill_chunk) of every prompt that long, right-padded
        to the longest. Returns each prompt's logits at its last position, (len(rows), V)."""
        C, last = self.prefill_chunk, [None] * len(rows)
        for start in range(0, max(map(len, prompts)), C):
            todo = [b for b, p in enumerate(prompts) if len(p) > start]
            chunks = [prompts[b][start : start + C] for b in todo]
            T = max(map(len, chunks))
            idx = to_device([c + [0] * (T - len(c)) for c in chunks], self.device)
            counts = [len(c) for c in chunks]
            kv = self.cache.fill(rows[todo], counts, start)
            logits = prefill(self.model, idx, kv, check=False)  # checked at submit
            for i, b in enumerate(todo):
                if start + counts[i] == len(prompts[b]):  # its last position is here
                    last[b] = logits[i, counts[i] - 1]
        return torch.stack(last)

    # --- graphs ---------------------------------------------------------------------------

    def captured(self) -> None:
        """With graphs, every graph before the first turn: capture() if it has not run."""
        if self.use_graph and self.capture_s is None:
            self.capture()

    @torch.no_grad()
    def capture(self) -> float:
        """Record every graph the engine can replay, before serving: each capture size and
        each prefill bucket (rows, positions), largest first, into one pool (Graphs). In a
        terminal, a progress bar shows when it takes more than a second (a notebook's output
        stays as it was: tqdm's disable=None, no bar off a terminal). Returns its seconds, also kept
        as capture_s. run() calls it first if it has not run: no graph is captured while
        serving."""
        validate_use_graph(True, self.device, self.graph_api)
        todo = [(self.decode_graphs, self.decode, size, size) for size in self.capture_sizes]
        if self.fill_graphs is not None:
            todo += [(self.fill_graphs, self.fill, (R, T), R * T)
                     for R in self.row_buckets for T in self.len_buckets]  # fmt: skip
        todo.sort(key=lambda t: -t[3])  # largest first: the smaller reuse the pool's memory
        t0 = time.perf_counter()
        for graphs, forward, key, _ in tqdm(
            todo, desc="capture", unit="graph", delay=1.0, disable=None
        ):
            if key not in graphs:
                graphs.capture(key, forward, self.cache)
        self.graph_api.synchronize()
        self.capture_s = round(time.perf_counter() - t0, 4)
        return self.capture_s
