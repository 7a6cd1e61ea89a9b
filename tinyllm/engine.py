"""Continuous batching: many requests, a fixed number of slots, one decode step for all.

Requests wait in a queue. Whenever a slot is free, the next request is admitted: its
prompt is prefilled eagerly into that slot, alone (kv="paged": in batches, below). Then
every decode step advances all active slots by one token together, through
SlotGraphDecoder (a CUDA graph per window on a GPU, or the same step eagerly). A request
leaves its slot when it emits eos_id or reaches its max_new_tokens, and the slot is free
for the next one at once.

kv="slots" (notebook 06): a SlotKVCache, every step over all n_slots rows through the
window of the longest. kv="paged" (notebook 08): a PagedKVCache; the requests are kept in
the first rows (a request that finishes leaves its row to the last one, moved there: its
table row and length, never its K/V), and each step runs the graph of the smallest capture
size that holds them, at every length. The requests admitted together are prefilled
together (notebook 09): one replay of a prefill graph when their prompts fit one chunk
(graphs.PrefillGraphs), else one eager forward per chunk of prefill_chunk positions for all
of them (prefill_batch). Its decode step samples inside the graph, into the next step's
input, and the host reads each step's ids one step late, which lets it schedule step t+1
while the GPU runs step t (overlap=True).

    engine = Engine(model, n_slots=8)
    rid = engine.submit(tokenizer.encode("The for statement"), max_new_tokens=50)
    out = engine.run()[rid]
"""

import contextlib
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from tinyllm.generation import draw_seeds, prefill, sample
from tinyllm.graphs import PrefillGraphs, SlotGraphDecoder
from tinyllm.kv_cache import SlotKVCache
from tinyllm.model import Transformer
from tinyllm.paged import PagedKVCache, to_device
from tinyllm.validate import (
    LIMITS,
    validate_bool,
    validate_eos,
    validate_int,
    validate_model,
    validate_overlap,
    validate_prefill_chunk,
    validate_sampling,
    validate_token_list,
    validate_use_graph,
)

PREFILL_CHUNK = 512  # kv="paged": positions of each prompt per prefill forward


@dataclass
class Request:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    temperature: float = 0.0
    top_k: int | None = None
    seed: int = 0  # keys the request's noise with each token's position (generation.sample)
    out: list[int] = field(default_factory=list)


@dataclass
class InFlight:
    """A move's sampled ids on their way to the host (kv="paged"): ids[i] is reqs[i]'s next
    token (None: a padded row), copied from the device without waiting; `ready` is a CUDA
    event recorded after the copy (None on a CPU, where the copy is done at once)."""

    reqs: list[Request | None]
    ids: torch.Tensor
    ready: object = None

    def wait(self) -> None:
        if self.ready is not None:
            self.ready.synchronize()


class Engine:
    """Continuous batching over n_slots slots. submit() queues a request, run() serves them
    all; admit() and step() are its two moves, public for the lessons.

    Nothing is lost when run() raises (Ctrl-C included): each move runs as one transaction
    (transaction()), undone whole if it does not finish, so the next run() returns the
    results finished so far with the rest, the same tokens as an uninterrupted run.
    kv="slots": a request whose own prefill or first sampling raises leaves alone, into
    `failed` (rid → the exception), and that exception is raised once the move is done; the
    others go on. A decode step samples every row in one call, so a failure there is the
    step's: undone. kv="paged" shares every forward and every sampling call between the
    requests of a move, so any failure is the move's, undone whole.

    kv="paged" prefills in batches: the requests admitted together (as many as there are
    free rows) share one prefill. When their prompts fit in prefill_chunk positions (default
    PREFILL_CHUNK: the presets' longest prompt in two chunks), it is one replay of the
    prefill graph of their bucket (graphs.PrefillGraphs: rows and positions padded to powers
    of two): an eager forward's host cost is its launches, which a replay pays once.
    prefill_graphs=False, or a longer prompt: eager forwards, one per chunk of prefill_chunk
    positions of each prompt, right-padded; a longer prompt goes on in the next chunk, which
    attends to its earlier ones through the cache. kv="slots" prefills each prompt alone.

    kv="paged" samples on the device: the admitted rows' first ids in one call, and every
    decode step inside its graph (SlotGraphDecoder(sampling=True)), into the next step's
    input, so no token goes through the host between steps. The host reads each move's ids
    one move late (InFlight): step t is launched, then the ids of the move before it are
    read, handed to their requests, the finished ones leave and new ones are admitted. A
    request's end is therefore seen one step late: its row runs once more, and that extra
    token is dropped. overlap=False waits for step t right after launching it, overlap=True
    does that host work while the GPU runs step t; both follow the same schedule (which
    request in which step, in which row), so the tokens are identical.
    """

    def __init__(self, model: Transformer, n_slots: int, max_len: int | None = None,
                 use_graph: bool | None = None, eos_id: int | None = None,
                 buckets: tuple[int, ...] | None = None, compile=False,
                 graph_api=torch.cuda, kv: str = "slots",
                 capture_sizes: tuple[int, ...] | None = None, limits=LIMITS,
                 prefill_chunk: int | None = None, overlap: bool = False,
                 prefill_graphs: bool = True):  # fmt: skip
        device, cfg = validate_model(model), model.cfg
        if kv not in ("slots", "paged"):
            raise ValueError(f"kv must be 'slots' or 'paged', got {kv!r}")
        validate_prefill_chunk(prefill_chunk, kv, limits)
        validate_overlap(overlap, kv)
        validate_bool("prefill_graphs", prefill_graphs)
        self.overlap = overlap
        self.prefill_chunk = (prefill_chunk or PREFILL_CHUNK) if kv == "paged" else None
        max_len = cfg.max_seq_len if max_len is None else max_len
        validate_int("max_len", max_len, lo=2, hi=cfg.max_seq_len)
        validate_eos(eos_id, cfg.vocab_size)
        use_graph = validate_use_graph(use_graph, device, graph_api)  # None: graphs on CUDA
        self.model, self.eos_id, self.device = model, eos_id, device
        cache = SlotKVCache if kv == "slots" else PagedKVCache
        self.kv, self.slots = kv, cache(cfg.n_layers, n_slots, max_len, device, limits=limits)
        self.n_slots = n_slots
        self.decoder = SlotGraphDecoder(
            model, self.slots, buckets, use_graph, compile, graph_api, capture_sizes,
            sampling=kv == "paged",
        )  # fmt: skip
        self.in_flight: list[InFlight] = []  # kv="paged": moves whose ids the host has not read
        self.prefill_graphs = None  # kv="paged": prompts that fit one chunk, as graphs
        if kv == "paged" and prefill_graphs:
            self.prefill_graphs = PrefillGraphs(self.decoder, self.prefill_chunk)
        self.queue: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # slot → request
        self.stats: list[dict] = []  # one entry per decode step (times: time.perf_counter)
        self.admissions: list[dict] = []  # one entry per admit() of run() that admitted
        self.finished: dict[int, list[int]] = {}  # rid → ids, until run() returns them
        self.failed: dict[int, BaseException] = {}  # rid → what its own data raised
        self.next_rid = 0

    @property
    def max_len(self) -> int:
        return self.slots.max_len

    @property
    def use_graph(self) -> bool:
        return self.decoder.use_graph

    def submit(self, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0,
               top_k: int | None = None, seed: int | None = None) -> int:  # fmt: skip
        """Queue a request; returns its id. Checked here, so run() never meets bad input."""
        V = self.model.cfg.vocab_size
        prompt = validate_token_list(prompt_ids, V)
        if not prompt:
            raise ValueError("empty prompt: a request needs at least one token")
        validate_int("max_new_tokens", max_new_tokens)
        if len(prompt) + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt length {len(prompt)} + max_new_tokens {max_new_tokens} > "
                f"slot max_len {self.max_len}"
            )
        validate_sampling(temperature, top_k, V, seed)  # before an id is taken
        if seed is None and temperature != 0:  # unseeded: a seed drawn once, here
            seed = draw_seeds(1)[0]
        rid = self.next_rid
        self.queue.append(Request(rid, prompt, max_new_tokens, temperature, top_k, seed or 0))
        self.next_rid += 1
        return rid

    def run(self) -> dict[int, list[int]]:
        """Serve every queued request; returns {request id: generated ids (EOS included)} for
        every request finished since the last run() returned."""
        while self.queue or self.running or self.in_flight:
            t0, waiting = time.perf_counter(), len(self.queue)
            self.admit()
            if len(self.queue) < waiting:
                self.admissions.append({"t0": t0, "n": waiting - len(self.queue),
                                        "admit_s": time.perf_counter() - t0})  # fmt: skip
            if self.running or self.in_flight:
                self.step()
        done, self.finished = self.finished, {}
        return done

    @torch.no_grad()
    def admit(self) -> None:
        """Move queued requests into free slots: prefill each prompt alone, eagerly, into
        its slot, and sample its first token (kv="paged": admit_in_batches)."""
        if self.kv == "paged":
            return self.admit_in_batches()
        while self.queue and self.slots.free_slots():
            slot, req = self.slots.free_slots()[0], self.queue[0]  # the lowest free slot
            with self.transaction([req]):
                self.queue.popleft()
                kv = self.slots.prefilling(slot)
                idx = torch.tensor([req.prompt], device=self.device)
                try:
                    logits = prefill(self.model, idx, kv, check=False)  # checked at submit
                    (tok,) = self.sample_for([req], logits[:, -1])
                except Exception as e:  # its own prefill or sampling: it leaves, alone
                    self.slots.release(slot)
                    self.failed[req.rid] = e
                    failure = e
                else:
                    self.running[slot] = req
                    self.emit(slot, req, tok)
                    failure = None
            if failure is not None:
                raise failure

    @torch.no_grad()
    def admit_in_batches(self) -> None:
        """kv="paged"'s admit(): as many queued requests as there are free rows, prefilled
        together into the lowest free rows, which take their sampling arguments; their first
        ids are sampled in one call, into the next step's input. The host reads those ids
        after the next step is launched (step_ahead)."""
        while self.queue and self.slots.free_slots():
            rows = self.slots.free_slots()[: len(self.queue)]
            reqs = [self.queue[b] for b in range(len(rows))]
            prompts = [req.prompt for req in reqs]
            with self.transaction(reqs):
                for _ in reqs:
                    self.queue.popleft()
                if self.prefill_graphs and max(map(len, prompts)) <= self.prefill_chunk:
                    sampling = [(r.temperature, r.top_k, r.seed) for r in reqs]
                    ids = self.prefill_graphs.prefill(rows, prompts, sampling)  # one replay
                else:
                    ids = self.prefill_eagerly(rows, reqs)
                self.running.update(zip(rows, reqs))
                self.send_to_host(reqs, ids)

    def prefill_eagerly(self, rows: list[int], reqs: list[Request]):
        """What a prefill graph does, eagerly and in chunks: the prompts prefilled
        (prefill_batch), the rows' sampling arguments set, the first ids sampled into the
        next step's input. Returns the ids (len(rows),) on the device."""
        last = self.prefill_batch(rows, [req.prompt for req in reqs])
        dec, at = self.decoder, to_device(rows, self.device)
        temperature = [r.temperature for r in reqs]
        dec.temperature[at] = to_device(temperature, self.device, dec.temperature.dtype)
        dec.top_k[at] = to_device([r.top_k or 0 for r in reqs], self.device)
        dec.seed[at] = to_device([r.seed for r in reqs], self.device)
        position = to_device([len(r.prompt) for r in reqs], self.device)
        ids = sample(last, dec.temperature[at], dec.top_k[at], dec.seed[at], position)
        dec.tok[at, 0] = ids
        return ids

    def prefill_batch(self, rows: list[int], prompts: list[list[int]]):
        """Prefill the prompts into their rows together, one forward per chunk: chunk j holds
        positions j·C..(j+1)·C-1 (C = prefill_chunk) of every prompt that long, right-padded
        to the longest. Returns each prompt's logits at its last position, (len(rows), V)."""
        C, last = self.prefill_chunk, [None] * len(rows)
        for start in range(0, max(map(len, prompts)), C):
            todo = [b for b, p in enumerate(prompts) if len(p) > start]
            chunks = [prompts[b][start : start + C] for b in todo]
            T = max(map(len, chunks))
            idx = torch.tensor([c + [0] * (T - len(c)) for c in chunks], device=self.device)
            counts = [len(c) for c in chunks]
            kv = self.slots.prefilling_chunk([rows[b] for b in todo], start, counts)
            logits = prefill(self.model, idx, kv, check=False)  # checked at submit
            for i, b in enumerate(todo):
                if start + counts[i] == len(prompts[b]):  # its last position is here
                    last[b] = logits[i, counts[i] - 1]
        return torch.stack(last)

    @torch.no_grad()
    def step(self) -> None:
        """One decode step for every slot at once (free slots compute and are ignored)
        (kv="paged": step_ahead)."""
        if self.kv == "paged":
            return self.step_ahead()
        t0 = time.perf_counter()
        n = self.n_slots
        holders = [self.running[s].rid if s in self.running else None for s in range(n)]
        last = [self.running[s].out[-1] if s in self.running else 0 for s in range(n)]
        tok = torch.tensor(last, device=self.device)[:, None]
        key = self.decoder.graph_key()
        with self.transaction(self.running.values()):
            t1 = time.perf_counter()
            logits = self.decoder.step(tok, check=False)[:, -1]  # ids checked or sampled
            t2 = time.perf_counter()
            toks = self.sample_for([self.running.get(s) for s in range(n)], logits)
            t3 = time.perf_counter()
            for s, req in list(self.running.items()):
                self.emit(s, req, toks[s])
        self.stats.append({"step": len(self.stats), "window": key, "slots": holders,
                           "n_active": n - holders.count(None), "t0": t0, "t_launch": t1,
                           "launch_s": t2 - t1, "read_s": t3 - t2,
                           "step_s": time.perf_counter() - t0})  # fmt: skip

    @torch.no_grad()
    def step_ahead(self) -> None:
        """kv="paged"'s step(): launch decode step t for the rows in use (it samples their
        next ids into its own input), then read the ids of the moves before it and hand them
        to their requests; the ones that finished leave, the rest are compacted. A request
        that finished at step t-1 ran in step t too: that token is dropped. overlap=False
        waits for step t first; overlap=True reads while the GPU runs it."""
        t0, key, holders = time.perf_counter(), None, []
        t1 = t2 = t0
        with self.transaction(self.running.values()):
            ready, self.in_flight = self.in_flight, []
            if self.running:
                key = self.decoder.graph_key()
                holders = [self.running.get(r) for r in range(key)]
                t1 = time.perf_counter()
                self.decoder.step(None, check=False)  # on the ids it sampled last time
                launched = self.send_to_host(holders, self.decoder.tok[:key, 0])
                t2 = time.perf_counter()
                if not self.overlap:
                    launched.wait()
            rows = {req.rid: row for row, req in self.running.items()}
            read_s = time.perf_counter() - t2
            for move in ready:
                t3 = time.perf_counter()
                move.wait()
                read_s += time.perf_counter() - t3
                for req, tok in zip(move.reqs, move.ids.tolist()):
                    if req is not None and not self.is_done(req):  # else its extra token
                        self.emit(rows[req.rid], req, tok)
            self.compact()
        if key is None:  # nothing launched: the last ids read, no step to record
            return
        self.stats.append({"step": len(self.stats), "capture_size": key,
                           "slots": [r.rid if r else None for r in holders],
                           "n_active": len(holders) - holders.count(None), "t0": t0,
                           "t_launch": t1, "launch_s": t2 - t1, "read_s": read_s,
                           "step_s": time.perf_counter() - t0})  # fmt: skip

    def send_to_host(self, reqs: list[Request | None], ids) -> InFlight:
        """Start copying a move's ids to the host, without waiting; step_ahead reads them."""
        move = InFlight(reqs, ids.to("cpu", non_blocking=True, copy=True))
        if ids.is_cuda:
            move.ready = torch.cuda.Event()
            move.ready.record()
        self.in_flight.append(move)
        return move

    def is_done(self, req: Request) -> bool:
        return len(req.out) == req.max_new_tokens or (bool(req.out) and req.out[-1] == self.eos_id)

    def emit(self, slot: int, req: Request, tok: int) -> None:
        """Append a generated token; a request that is done leaves its slot."""
        req.out.append(tok)
        if tok == self.eos_id or len(req.out) == req.max_new_tokens:
            self.finished[req.rid] = req.out
            del self.running[slot]
            self.slots.release(slot)

    def compact(self) -> None:
        """Keep the requests in the first rows: each free row below the last request takes
        that request (kv="paged": its table row and length move, not its K/V)."""
        while True:
            free, last = self.slots.free_slots(), max(self.running, default=-1)
            if not free or free[0] > last:
                return
            self.slots.move(last, free[0])
            if self.kv == "paged":  # the row's next id and sampling arguments move with it
                dec = self.decoder
                for buf in (dec.tok, dec.temperature, dec.top_k, dec.seed):
                    buf[free[0] : free[0] + 1] = buf[last : last + 1]
            self.running[free[0]] = self.running.pop(last)

    def sample_for(self, reqs: list[Request | None], logits) -> list[int]:
        """Every row's next token in one call on the device, row i by reqs[i]'s sampling
        (None: a free row, greedy and ignored), keyed by its seed and the position of the
        token drawn; the host reads the ids once."""
        rows = [r or Request(-1, [0], 1) for r in reqs]  # a free row: greedy, ignored
        temperature = [float(r.temperature) for r in rows]
        temperature = torch.tensor(temperature, device=self.device)
        top_k = torch.tensor([r.top_k or 0 for r in rows], device=self.device)
        seed = torch.tensor([r.seed for r in rows], device=self.device)
        position = torch.tensor([len(r.prompt) + len(r.out) for r in rows], device=self.device)
        return sample(logits, temperature, top_k, seed, position).tolist()

    @contextlib.contextmanager
    def transaction(self, reqs):
        """One move (an admission, a decode step) as a whole: if the block does not finish
        (an exception, Ctrl-C), everything it changed goes back, the slots' positions by
        their own transaction (which the decoder's step joins), and here the queue, who holds
        which slot, the results and failures, and each request's tokens (its noise is keyed
        by seed and position: no generator state to put back). K/V are not saved: what an
        undone step wrote lies past every slot's length."""
        state = (deque(self.queue), dict(self.running), dict(self.finished), dict(self.failed),
                 list(self.in_flight))  # fmt: skip
        reqs = [(r, len(r.out)) for r in reqs]
        tok = self.decoder.tok.clone() if self.kv == "paged" else None  # a step overwrites it
        with self.slots.transaction():  # Ctrl-C held off from here to the end
            try:
                yield
            except BaseException:
                self.queue, self.running, self.finished, self.failed, self.in_flight = state
                for req, n_out in reqs:
                    del req.out[n_out:]
                if tok is not None:
                    self.decoder.tok.copy_(tok)
                raise
