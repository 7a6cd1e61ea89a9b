"""Continuous batching: many requests, a fixed number of slots, one decode step for all
(notebook 06).

Requests wait in a queue. Whenever a slot is free, the next request is admitted: its prompt is
prefilled eagerly into that slot, alone. Then every decode step advances all active slots by
one token together, through SlotGraphDecoder (a CUDA graph per window on a GPU, or the same
step eagerly). A request leaves its slot when it emits eos_id or reaches its max_new_tokens,
and the slot is free for the next one at once.

    engine = Engine(model, n_slots=8)
    rid = engine.submit(tokenizer.encode("The for statement"), max_new_tokens=50)
    out = engine.run()[rid]

Serving is what this engine shares with the paged one of notebooks 08-09 (serve.PagedEngine):
the requests handed in (submit) and handed back (run's result), and the transaction that
makes each turn (an admission, a decode step) whole.
"""

import contextlib
import time
from dataclasses import dataclass, field

import torch

from tinyllm.generation import draw_seeds, prefill, sample
from tinyllm.graphs import SlotGraphDecoder, resolve_buckets
from tinyllm.kv_cache import SlotKVCache
from tinyllm.model import Transformer
from tinyllm.validate import (
    LIMITS,
    signals_held,
    validate_eos,
    validate_graph_args,
    validate_int,
    validate_model,
    validate_sampling,
    validate_token_list,
)


@dataclass
class Request:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    temperature: float = 0.0
    top_k: int | None = None
    seed: int = 0  # keys the request's noise with each token's position (generation.sample)
    out: list[int] = field(default_factory=list)


class Serving:
    """What both engines share: requests handed in and handed back, and the transaction.

    submit() checks a request and queues it; run() serves the queue and returns what
    finished. Nothing is lost when run() raises (Ctrl-C included): each turn runs as one
    transaction, undone whole if it does not finish, so the next run() returns the results
    finished so far with the rest, the same tokens as an uninterrupted run."""

    def __init__(self, model: Transformer, max_len: int, eos_id: int | None):
        validate_eos(eos_id, model.cfg.vocab_size)
        self.model, self.max_len, self.eos_id = model, max_len, eos_id
        self.requests: dict[int, Request] = {}  # rid → every request not yet handed back
        self.waiting: list[Request] = []  # in submit order; waiting[head:] still wait
        self.head = 0
        self.finished: list[int] = []  # rids finished since run() last returned
        self.stats: list[dict] = []  # one entry per decode step (times: time.perf_counter)
        self.admissions: list[dict] = []  # one entry per admission of run()
        self.next_rid = 0
        self.moving = False  # inside a turn's transaction

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
                f"max_len {self.max_len}"
            )
        validate_sampling(temperature, top_k, V, seed)  # before an id is taken
        if seed is None and temperature != 0:  # unseeded: a seed drawn once, here
            seed = draw_seeds(1)[0]
        rid = self.next_rid
        req = Request(rid, prompt, max_new_tokens, temperature, top_k, seed or 0)
        self.requests[rid] = req
        self.waiting.append(req)
        self.next_rid += 1
        return rid

    def n_waiting(self) -> int:
        return len(self.waiting) - self.head

    def hand_back(self) -> dict[int, list[int]]:
        """The finished requests' ids, {rid: generated ids}, handed back once."""
        with signals_held:
            done = {rid: self.requests.pop(rid).out for rid in self.finished}
            self.finished, self.waiting, self.head = [], self.waiting[self.head :], 0
        return done

    def is_done(self, req: Request) -> bool:
        out = req.out
        return len(out) == req.max_new_tokens or (bool(out) and out[-1] == self.eos_id)

    @contextlib.contextmanager
    def transaction(self, cache, sync: bool = True):
        """One turn (an admission, a decode step) as a whole. Before it: the device brought
        in step if an undo left it behind (cache.sync()), then what the turn may change
        saved, O(what it changes): the rows (cache.rows.snapshot()), how far the queue has
        been read, how many results are kept, and what saved_state() returns. A turn appends
        each token it hands out to self.appended. If the block does not finish (an exception,
        Ctrl-C, a timer), the undo is assignments alone, which cannot raise, then a rewrite of the
        device that may fail without harm (the next turn's sync does it). Ctrl-C and timer
        signals are held off for the whole turn: one that arrives is raised once it has
        finished or been undone. K/V are not saved: what an undone step wrote lies past every
        length. sync=False, for a turn that flushes the rows itself before its first device
        work (the paged step) or writes only its own rows (an admission's prefill graph):
        rows.settle() instead, which flushes only what an undo or a move of tok left. A turn
        inside a turn (the paged step's admission) is part of it: undone with it."""
        if self.moving:
            yield
            return
        with signals_held:
            cache.sync() if sync else cache.rows.settle()
            saved = cache.rows.snapshot(), self.head, len(self.finished), self.saved_state()
            self.appended: list[list[int]] = []
            self.moving = True
            try:
                yield
            except BaseException:
                rows, self.head, n_finished, mine = saved
                del self.finished[n_finished:]
                for out in self.appended:
                    del out[-1]
                self.put_back(mine)
                cache.rows.restore(rows)
                with contextlib.suppress(Exception):
                    cache.sync()
                raise
            finally:
                self.moving = False

    def saved_state(self):
        """What else a turn of this engine may change (the slot engine: who holds which slot)."""
        return None

    def put_back(self, state) -> None:
        pass


class Engine(Serving):
    """Continuous batching over n_slots slots. submit() queues a request, run() serves them
    all; admit() and step() are its two turns, public for the lessons. A request whose own
    prefill or first sampling raises leaves alone, into `failed` (rid → the exception), and
    that exception is raised once the turn is done; the others go on. A decode step samples
    every slot in one call, so a failure there is the step's: undone."""

    def __init__(self, model: Transformer, n_slots: int, max_len: int | None = None,
                 use_graph: bool | None = None, eos_id: int | None = None,
                 buckets: tuple[int, ...] | None = None, compile=False,
                 graph_api=torch.cuda, limits=LIMITS):  # fmt: skip
        device, cfg = validate_model(model), model.cfg
        max_len = cfg.max_seq_len if max_len is None else max_len
        validate_int("max_len", max_len, lo=2, hi=cfg.max_seq_len)
        super().__init__(model, max_len, eos_id)
        use_graph = validate_graph_args(model, use_graph, compile, graph_api)  # None: on CUDA
        buckets = resolve_buckets(buckets, max_len)
        self.device, self.n_slots = device, n_slots
        self.slots = SlotKVCache(cfg.n_layers, n_slots, max_len, device, limits=limits)
        self.decoder = SlotGraphDecoder(model, self.slots, buckets, use_graph, compile,
                                        graph_api)  # fmt: skip
        self.running: dict[int, Request] = {}  # slot → request
        self.failed: dict[int, BaseException] = {}  # rid → what its own data raised

    @property
    def use_graph(self) -> bool:
        return self.decoder.use_graph

    def run(self) -> dict[int, list[int]]:
        """Serve every queued request; returns {request id: generated ids (EOS included)} for
        every request finished since the last run() returned."""
        while self.n_waiting() or self.running:
            t0, waiting = time.perf_counter(), self.n_waiting()
            self.admit()
            if self.n_waiting() < waiting:
                self.admissions.append({"t0": t0, "n": waiting - self.n_waiting(),
                                        "admit_s": time.perf_counter() - t0})  # fmt: skip
            if self.running:
                self.step()
        return self.hand_back()

    @torch.no_grad()
    def admit(self) -> None:
        """Move queued requests into free slots: prefill each prompt alone, eagerly, into
        its slot, and sample its first token."""
        while self.n_waiting() and self.slots.free_slots():
            slot, req = self.slots.free_slots()[0], self.waiting[self.head]  # the lowest slot
            with self.transaction(self.slots):
                self.head += 1
                kv = self.slots.prefilling(slot)
                idx = torch.tensor([req.prompt], device=self.device)
                try:
                    logits = prefill(self.model, idx, kv, check=False)  # checked at submit
                    (token_id,) = self.sample_for([req], logits[:, -1])
                except Exception as e:  # its own prefill or sampling: it leaves, alone
                    self.slots.release(slot)
                    self.failed[req.rid] = e
                    failure = e
                else:
                    self.running[slot] = req
                    self.emit(slot, req, token_id)
                    failure = None
            if failure is not None:
                raise failure

    @torch.no_grad()
    def step(self) -> None:
        """One decode step for every slot at once (free slots compute and are ignored)."""
        t0 = time.perf_counter()
        n = self.n_slots
        holders = [self.running[s].rid if s in self.running else None for s in range(n)]
        last = [self.running[s].out[-1] if s in self.running else 0 for s in range(n)]
        tok = torch.tensor(last, device=self.device)[:, None]
        key = self.decoder.graph_key()
        with self.transaction(self.slots):
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

    def emit(self, slot: int, req: Request, token_id: int) -> None:
        """Append a generated token; a request that is done leaves its slot."""
        req.out.append(token_id)
        self.appended.append(req.out)
        if token_id == self.eos_id or len(req.out) == req.max_new_tokens:
            self.finished.append(req.rid)
            del self.running[slot]
            self.slots.release(slot)

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

    def saved_state(self):
        return dict(self.running), dict(self.failed)  # O(n_slots)

    def put_back(self, state) -> None:
        self.running, self.failed = state
