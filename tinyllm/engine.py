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
size that holds them, at every length. The requests admitted together are prefilled in
batches (prefill_batch): one forward per chunk of prefill_chunk positions for all of them,
instead of one forward per request.

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
from tinyllm.graphs import SlotGraphDecoder
from tinyllm.kv_cache import SlotKVCache
from tinyllm.model import Transformer
from tinyllm.paged import PagedKVCache
from tinyllm.validate import (
    LIMITS,
    validate_eos,
    validate_int,
    validate_model,
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


class Engine:
    """Continuous batching over n_slots slots. submit() queues a request, run() serves them
    all; admit() and step() are its two moves, public for the lessons.

    Nothing is lost when run() raises (Ctrl-C included): each move runs as one transaction
    (transaction()), undone whole if it does not finish, so the next run() returns the
    results finished so far with the rest, the same tokens as an uninterrupted run. A request
    whose own prefill or first sampling raises leaves alone, into `failed` (rid → the
    exception), and that exception is raised once the move is done; the others go on. A
    decode step samples every row in one call, so a failure there is the step's: undone.

    kv="paged" prefills in batches: the requests admitted together (as many as there are
    free rows) share each prefill forward, their prompts right-padded, in chunks of at most
    prefill_chunk positions of each prompt (default PREFILL_CHUNK: the presets' longest
    prompt in two chunks); a longer prompt goes on in the next chunk, which attends to its
    earlier ones through the cache. An eager forward's host cost (its launches) does not
    grow with the rows it holds: this pays it once per chunk instead of once per request.
    The forward is shared, so its failure is the admission's, undone whole like a decode
    step's; a request's own first-token sampling still leaves alone. kv="slots" prefills
    each prompt alone.
    """

    def __init__(self, model: Transformer, n_slots: int, max_len: int | None = None,
                 use_graph: bool | None = None, eos_id: int | None = None,
                 buckets: tuple[int, ...] | None = None, compile=False,
                 graph_api=torch.cuda, kv: str = "slots",
                 capture_sizes: tuple[int, ...] | None = None, limits=LIMITS,
                 prefill_chunk: int | None = None):  # fmt: skip
        device, cfg = validate_model(model), model.cfg
        if kv not in ("slots", "paged"):
            raise ValueError(f"kv must be 'slots' or 'paged', got {kv!r}")
        validate_prefill_chunk(prefill_chunk, kv, limits)
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
            model, self.slots, buckets, use_graph, compile, graph_api, capture_sizes
        )
        self.queue: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # slot → request
        self.stats: list[dict] = []  # one entry per decode step
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
        while self.queue or self.running:
            self.admit()
            if self.running:
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
        together into the lowest free rows (prefill_batch), then each samples its first
        token; the requests that finish at once leave their rows, the rest stay compact."""
        while self.queue and self.slots.free_slots():
            rows = self.slots.free_slots()[: len(self.queue)]
            reqs = [self.queue[b] for b in range(len(rows))]
            failure = None
            with self.transaction(reqs):
                for _ in reqs:
                    self.queue.popleft()
                last = self.prefill_batch(rows, [req.prompt for req in reqs])
                for b, (row, req) in enumerate(zip(rows, reqs)):
                    try:
                        (tok,) = self.sample_for([req], last[b : b + 1])
                    except Exception as e:  # its own sampling: it leaves, the others go on
                        self.slots.release(row)
                        self.failed[req.rid] = e
                        failure = failure or e
                        continue
                    self.running[row] = req
                    self.emit(row, req, tok)
                self.compact()
            if failure is not None:
                raise failure

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
        """One decode step for every slot at once (free slots compute and are ignored)."""
        t0 = time.perf_counter()
        n = self.n_slots
        holders = [self.running[s].rid if s in self.running else None for s in range(n)]
        last = [self.running[s].out[-1] if s in self.running else 0 for s in range(n)]
        tok = torch.tensor(last, device=self.device)[:, None]
        key = self.decoder.graph_key()
        with self.transaction(self.running.values()):
            logits = self.decoder.step(tok, check=False)[:, -1]  # ids checked or sampled
            rows = range(logits.shape[0])  # kv="paged": the capture size's rows
            toks = self.sample_for([self.running.get(s) for s in rows], logits)
            for s, req in list(self.running.items()):
                self.emit(s, req, toks[s])
            if self.kv == "paged":
                self.compact()
        shape = "window" if self.kv == "slots" else "capture_size"
        self.stats.append({"step": len(self.stats), shape: key, "slots": holders,
                           "n_active": n - holders.count(None),
                           "step_s": time.perf_counter() - t0})  # fmt: skip

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
        state = (deque(self.queue), dict(self.running), dict(self.finished), dict(self.failed))
        reqs = [(r, len(r.out)) for r in reqs]
        with self.slots.transaction():  # Ctrl-C held off from here to the end
            try:
                yield
            except BaseException:
                self.queue, self.running, self.finished, self.failed = state
                for req, n_out in reqs:
                    del req.out[n_out:]
                raise
