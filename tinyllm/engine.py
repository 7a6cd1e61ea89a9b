"""Continuous batching: many requests, a fixed number of slots, one decode step for all.

Requests wait in a queue. Whenever a slot is free, the next request is admitted: its
prompt is prefilled eagerly into that slot, alone. Then every decode step advances all
active slots by one token together, through SlotGraphDecoder (a CUDA graph per window on
a GPU, or the same step eagerly). A request leaves its slot when it emits eos_id or
reaches its max_new_tokens, and the slot is free for the next one at once.

    engine = Engine(model, n_slots=8)
    rid = engine.submit(tok.encode("The for statement"), max_new_tokens=50)
    out = engine.run()[rid]
"""

import time
from collections import deque
from dataclasses import dataclass, field

import torch

from tinyllm.checks import check_eos, check_int, check_sampling, is_int, model_device
from tinyllm.generation import make_generator, prefill, sample
from tinyllm.graphs import SlotGraphDecoder
from tinyllm.kv_cache import SlotKVCache
from tinyllm.model import Transformer


@dataclass
class Request:
    rid: int
    prompt: list[int]
    max_new_tokens: int
    temperature: float = 0.0
    top_k: int | None = None
    generator: torch.Generator | None = None
    out: list[int] = field(default_factory=list)


class Engine:
    """Continuous batching over n_slots slots. submit() queues a request, run() serves them
    all; admit() and step() are its two moves, public for the lessons.

    Nothing is lost when run() raises (Ctrl-C included): an admission or a decode step that
    does not finish is undone (the slots' positions, which request holds which slot, the
    requests' tokens and random generators, the finished results), the results finished so
    far stay in `finished`, and the next run() returns them with the rest, the same tokens
    as an uninterrupted run. An exception raised by one request's own sampling or prefill
    removes that request alone, into `failed` (rid → the exception), and is raised again.
    """

    def __init__(
        self,
        model: Transformer,
        n_slots: int,
        max_len: int | None = None,
        use_graph: bool | None = None,
        eos_id: int | None = None,
        buckets: tuple[int, ...] | None = None,
    ):
        device = model_device(model)
        cfg = model.cfg
        check_int("n_slots", n_slots)
        max_len = cfg.max_seq_len if max_len is None else max_len
        if not is_int(max_len) or not 2 <= max_len <= cfg.max_seq_len:
            raise ValueError(f"max_len {max_len!r} outside [2, max_seq_len {cfg.max_seq_len}]")
        check_eos(eos_id, cfg.vocab_size)
        if use_graph is not None and not isinstance(use_graph, bool):
            raise ValueError(f"use_graph must be None, True or False, got {use_graph!r}")
        self.model, self.eos_id, self.device = model, eos_id, device
        self.use_graph = device.type == "cuda" if use_graph is None else use_graph
        self.slots = SlotKVCache(cfg.n_layers, n_slots, max_len, device)
        self.decoder = SlotGraphDecoder(model, self.slots, buckets, self.use_graph)
        self.queue: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # slot → request
        self.stats: list[dict] = []  # one entry per decode step
        self.finished: dict[int, list[int]] = {}  # rid → ids, until run() returns them
        self.failed: dict[int, BaseException] = {}  # rid → what its own data raised
        self.next_rid = 0

    @property
    def max_len(self) -> int:
        return self.slots.max_len

    def submit(
        self,
        prompt_ids,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        seed: int | None = None,
    ) -> int:
        """Queue a request; returns its id. Checked here, so run() never meets bad input."""
        if isinstance(prompt_ids, torch.Tensor):
            if (
                prompt_ids.dim() != 1
                or prompt_ids.dtype.is_floating_point
                or (prompt_ids.dtype.is_complex or prompt_ids.dtype == torch.bool)
            ):
                raise ValueError(
                    f"prompt_ids must be a 1-D integer tensor or a list of ints, "
                    f"got {prompt_ids.dtype} of shape {tuple(prompt_ids.shape)}"
                )
            prompt_ids = prompt_ids.tolist()
        if isinstance(prompt_ids, (str, bytes)) or not hasattr(prompt_ids, "__iter__"):
            raise ValueError(f"prompt_ids must be a list of ints, got {type(prompt_ids).__name__}")
        prompt = list(prompt_ids)
        V = self.model.cfg.vocab_size
        if not prompt:
            raise ValueError("empty prompt: a request needs at least one token")
        for t in prompt:
            if not is_int(t):
                raise ValueError(f"prompt_ids must be ints, got {t!r}")
            if not 0 <= t < V:
                raise ValueError(f"prompt holds token id {t}, outside the vocabulary [0, {V})")
        check_int("max_new_tokens", max_new_tokens)
        if len(prompt) + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt length {len(prompt)} + max_new_tokens {max_new_tokens} > "
                f"slot max_len {self.max_len}"
            )
        check_sampling(temperature, top_k, V, seed)  # before an id is taken
        generator = make_generator(seed, self.device)
        rid = self.next_rid
        self.queue.append(Request(rid, prompt, max_new_tokens, temperature, top_k, generator))
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

    def emit(self, slot: int, req: Request, tok: int) -> None:
        """Append a generated token; a request that is done leaves its slot."""
        req.out.append(tok)
        if tok == self.eos_id or len(req.out) == req.max_new_tokens:
            self.finished[req.rid] = req.out
            del self.running[slot]
            self.slots.release(slot)

    def sample_for(self, req: Request, logits) -> int:
        """The request's next token from its logits (1, V), with its own sampling."""
        return int(sample(logits, req.temperature, req.top_k, req.generator))

    @torch.no_grad()
    def admit(self) -> None:
        """Move queued requests into free slots: prefill each prompt alone, eagerly, into
        its slot, and sample its first token. Each admission is undone if it raises."""
        for slot in self.slots.free_slots():
            if not self.queue:
                return
            req = self.queue[0]
            undo, culprit = self.undo_log([req]), None
            try:
                self.running[slot] = req
                self.slots.admit(slot, len(req.prompt))
                idx = torch.tensor([req.prompt], device=self.device)
                culprit = req  # from here to its first token, a failure is its own
                logits = prefill(self.model, idx, self.slots, check=False)  # checked at submit
                tok = self.sample_for(req, logits[:, -1])
                culprit = None
                self.emit(slot, req, tok)
                self.queue.popleft()  # done: the request holds its slot, or has finished
            except BaseException as e:
                self.undo(undo)
                if not (self.queue and self.queue[0] is req):
                    self.queue.appendleft(req)  # it was taken off the queue: back in front
                if culprit is not None and isinstance(e, Exception):  # not again
                    self.failed[self.queue.popleft().rid] = e
                raise

    @torch.no_grad()
    def step(self) -> None:
        """One decode step for every slot at once (free slots compute and are ignored). The
        step is undone if it raises; if one request's sampling raised, that request leaves."""
        t0 = time.perf_counter()
        n = self.slots.n_slots
        holders = [self.running[s].rid if s in self.running else None for s in range(n)]
        window = self.decoder.bucket_for(max(self.slots.lens) + 1)
        last = [self.running[s].out[-1] if s in self.running else 0 for s in range(n)]
        tok = torch.tensor(last, device=self.device)[:, None]
        undo, culprit = self.undo_log(list(self.running.values())), None
        try:
            logits = self.decoder.step(tok, check=False)[:, -1]  # ids checked or sampled
            greedy = logits.argmax(dim=-1).tolist()  # free slots' rows are ignored
            new = {}
            for s, req in self.running.items():
                culprit = req
                new[s] = (
                    greedy[s] if req.temperature == 0 else self.sample_for(req, logits[s : s + 1])
                )
            culprit = None
            for s, t in new.items():
                self.emit(s, self.running[s], t)
        except BaseException as e:
            self.undo(undo)
            if culprit is not None and isinstance(e, Exception):
                slot = next(s for s, r in self.running.items() if r is culprit)
                del self.running[slot]
                self.slots.release(slot)
                self.failed[culprit.rid] = e
            raise
        self.stats.append({"step": len(self.stats), "window": window, "slots": holders,
                           "n_active": n - holders.count(None),
                           "step_s": time.perf_counter() - t0})  # fmt: skip

    def undo_log(self, reqs: list[Request]) -> dict:
        """What undo() needs to put back: the slots' positions, who holds which slot, the
        finished results so far, and each request's token count and generator state. (K/V
        are not saved: what an undone step wrote lies past every slot's length, and the
        retry overwrites it.)"""
        return {"slots": self.slots.snapshot(), "running": dict(self.running),
                "n_finished": len(self.finished),
                "reqs": [(r, len(r.out), r.generator.get_state() if r.generator else None)
                         for r in reqs]}  # fmt: skip

    def undo(self, log: dict) -> None:
        self.slots.restore(log["slots"])
        self.running = log["running"]
        for rid in list(self.finished)[log["n_finished"] :]:
            del self.finished[rid]
        for req, n_out, state in log["reqs"]:
            del req.out[n_out:]
            if state is not None:
                req.generator.set_state(state)
