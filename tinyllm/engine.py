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

from tinyllm.checks import check_sampling, model_device
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
        if not isinstance(n_slots, int) or n_slots < 1:
            raise ValueError(f"n_slots must be an int >= 1, got {n_slots!r}")
        max_len = cfg.max_seq_len if max_len is None else max_len
        if not isinstance(max_len, int) or not 2 <= max_len <= cfg.max_seq_len:
            raise ValueError(f"max_len {max_len} outside [2, max_seq_len {cfg.max_seq_len}]")
        if eos_id is not None and not 0 <= eos_id < cfg.vocab_size:
            raise ValueError(f"eos_id {eos_id} outside the vocabulary [0, {cfg.vocab_size})")
        self.model, self.eos_id, self.device = model, eos_id, device
        self.use_graph = device.type == "cuda" if use_graph is None else use_graph
        self.slots = SlotKVCache(cfg.n_layers, n_slots, max_len, device)
        self.decoder = SlotGraphDecoder(model, self.slots, buckets, self.use_graph)
        self.queue: deque[Request] = deque()
        self.running: dict[int, Request] = {}  # slot → request
        self.stats: list[dict] = []  # one entry per decode step
        self.finished: dict[int, list[int]] = {}  # rid → ids, until run() returns them
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
            if prompt_ids.dim() != 1 or prompt_ids.dtype.is_floating_point:
                raise ValueError(
                    f"prompt_ids must be a 1-D integer tensor or a list of ints, "
                    f"got {prompt_ids.dtype} of shape {tuple(prompt_ids.shape)}"
                )
            prompt_ids = prompt_ids.tolist()
        prompt = list(prompt_ids)
        V = self.model.cfg.vocab_size
        if not prompt:
            raise ValueError("empty prompt: a request needs at least one token")
        for t in prompt:
            if not isinstance(t, int) or isinstance(t, bool):
                raise ValueError(f"prompt_ids must be ints, got {t!r}")
            if not 0 <= t < V:
                raise ValueError(f"prompt holds token id {t}, outside the vocabulary [0, {V})")
        if (
            not isinstance(max_new_tokens, int)
            or isinstance(max_new_tokens, bool)
            or max_new_tokens < 1
        ):
            raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
        if len(prompt) + max_new_tokens > self.max_len:
            raise ValueError(
                f"prompt length {len(prompt)} + max_new_tokens {max_new_tokens} > "
                f"slot max_len {self.max_len}"
            )
        check_sampling(temperature, top_k, V, seed)
        rid = self.next_rid
        self.next_rid += 1
        self.queue.append(
            Request(
                rid, prompt, max_new_tokens, temperature, top_k, make_generator(seed, self.device)
            )
        )
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

    @torch.no_grad()
    def admit(self) -> None:
        """Move queued requests into free slots: prefill each prompt alone, eagerly, into
        its slot, and sample its first token."""
        for slot in self.slots.free_slots():
            if not self.queue:
                return
            req = self.queue.popleft()
            self.running[slot] = req
            self.slots.admit(slot, len(req.prompt))
            idx = torch.tensor([req.prompt], device=self.device)
            logits = prefill(self.model, idx, self.slots)
            tok = sample(logits[:, -1], req.temperature, req.top_k, req.generator)
            self.emit(slot, req, int(tok))

    @torch.no_grad()
    def step(self) -> None:
        """One decode step for every slot at once (free slots compute and are ignored)."""
        t0 = time.perf_counter()
        n = self.slots.n_slots
        holders = [self.running[s].rid if s in self.running else None for s in range(n)]
        window = self.decoder.bucket_for(max(self.slots.lens) + 1)
        last = [self.running[s].out[-1] if s in self.running else 0 for s in range(n)]
        tok = torch.tensor(last, device=self.device)[:, None]
        logits = self.decoder.step(tok, check=False)[:, -1]  # ids the engine checked or sampled
        greedy = logits.argmax(dim=-1).tolist()  # free slots' rows are ignored
        for s, req in list(self.running.items()):
            nxt = (
                greedy[s]
                if req.temperature == 0
                else int(sample(logits[s : s + 1], req.temperature, req.top_k, req.generator))
            )
            self.emit(s, req, nxt)
        self.stats.append({"step": len(self.stats), "window": window, "slots": holders,
                           "n_active": n - holders.count(None),
                           "step_s": time.perf_counter() - t0})  # fmt: skip
