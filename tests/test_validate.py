"""The doors: every bad call a user can make is refused with a ValueError that names the
value and the limit, before any device work.

One table per door (validate.py lists the doors). Each row is (what the user passed, a
set-up, the call, the message it must raise). "Before any device work" is checked with a
forward pre-hook on the model: the model must not run during the refused call (an
out-of-range id that reached a CUDA kernel would poison the whole process); where the
set-up made a decoder or a cache, its positions must be unchanged.
"""

import os
import signal
import types

import pytest
import torch

import tinyllm
from tinyllm import (
    Engine,
    GraphDecoder,
    KVCache,
    Limits,
    ModelConfig,
    SlotGraphDecoder,
    SlotKVCache,
    StaticKVCache,
    Tokenizer,
    Transformer,
    bucket_for,
    default_buckets,
    generate,
    load,
    save,
)
from tinyllm.checkpoint import PRETRAINED
from tinyllm.generation import decode_step, prefill
from tinyllm.paged import PagedKVCache
from tinyllm.serve import PagedEngine
from tinyllm.validate import signals_held

V = 258  # vocab_size of every preset
MAX = 1024  # the shipped model's max_seq_len


def ids(*shape, lo=0, hi=256):
    """Token ids of the given shape (fixed: also called while tests are collected)."""
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(0))


def sparse_ids():
    return ids(1, 4).to_sparse()


def meta_ids():
    return torch.zeros(1, 4, dtype=torch.long, device="meta")


def static(m, batch=2, max_len=64):
    dec = GraphDecoder(m, batch, max_len=max_len, buckets=(32, max_len), use_graph=False)
    dec.prefill(ids(batch, 5))
    return dec


def slots(m, n_slots=4, max_len=64, prompt=(2, 6)):
    cache = SlotKVCache(m.cfg.n_layers, n_slots, max_len, "cpu")
    dec = SlotGraphDecoder(m, cache, buckets=(32, max_len), use_graph=False)
    if prompt:
        slot, T = prompt
        prefill(m, ids(1, T), cache.prefilling(slot))
    return dec


def full_static(m):
    dec = GraphDecoder(m, 1, max_len=40, buckets=(16, 40), use_graph=False)
    dec.prefill(ids(1, 37))
    for _ in range(3):  # positions 37, 38, 39: the last three of the cache
        dec.step(ids(1, 1))
    return dec


def paged(m):
    """A paged cache of 4 rows, row 1 prefilled with 5 positions."""
    cache = PagedKVCache(m.cfg.n_layers, 4, 64, "cpu")
    cache.rows.take([1], [5])
    prefill(m, ids(1, 5), cache.fill([1], [5]))
    cache.rows.admit([1], [5])
    return types.SimpleNamespace(cache=cache)


def with_length(snapshot, n):
    snapshot.host.state[0, 0] = n
    return snapshot


def paged_engine(m):
    return PagedEngine(m, 2, max_len=64, use_graph=False)


def engine(m):
    return Engine(m, 2, max_len=64, use_graph=False)


def model(m):
    return m


DOORS = {  # door → [(what the user passed, set-up, call, message)]
    "generate": [
        (
            "id -1",
            model,
            lambda m: generate(m, torch.tensor([[5, -1]]), 4),
            rf"idx holds token id -1, outside the vocabulary \[0, {V}\)",
        ),
        (
            f"id {V}",
            model,
            lambda m: generate(m, torch.tensor([[V, 5]]), 4),
            rf"idx holds token id {V}, outside the vocabulary",
        ),
        (
            "int16 id 300",
            model,
            lambda m: generate(m, torch.tensor([[300]], dtype=torch.int16), 2),
            r"idx holds token id 300, outside the vocabulary",
        ),
        (
            "shape (1, 0)",
            model,
            lambda m: generate(m, torch.zeros(1, 0, dtype=torch.long), 4),
            r"empty prompt: idx has shape \(1, 0\)",
        ),
        (
            "shape (0, 5)",
            model,
            lambda m: generate(m, torch.zeros(0, 5, dtype=torch.long), 4),
            r"empty prompt: idx has shape \(0, 5\)",
        ),
        (
            "1-D ids",
            model,
            lambda m: generate(m, ids(5), 4),
            r"idx must be \(B, T\), got shape \(5,\)",
        ),
        (
            "a list",
            model,
            lambda m: generate(m, [[1, 2, 3]], 4),
            r"idx must be a torch.Tensor, got .* \(list\)",
        ),
        (
            "float ids",
            model,
            lambda m: generate(m, ids(1, 5).float(), 4),
            r"idx must hold integer token ids, got dtype torch.float32",
        ),
        (
            "bool ids",
            model,
            lambda m: generate(m, torch.ones(1, 3, dtype=torch.bool), 2),
            r"idx must hold integer token ids, got dtype torch.bool",
        ),
        (
            "complex ids",
            model,
            lambda m: generate(m, ids(1, 3).to(torch.complex64), 2),
            r"idx must hold integer token ids, got dtype torch.complex64",
        ),
        (
            "sparse ids",
            model,
            lambda m: generate(m, sparse_ids(), 2),
            r"idx must be a dense tensor, got layout torch.sparse_coo",
        ),
        (
            "meta ids",
            model,
            lambda m: generate(m, meta_ids(), 2),
            r"idx is on the meta device and holds no values",
        ),
        (
            f"T {MAX + 1} + 1",
            model,
            lambda m: generate(m, ids(1, MAX + 1), 1),
            rf"prompt length {MAX + 1} \+ max_new_tokens 1 = {MAX + 2} > max_len {MAX}",
        ),
        (
            "T 1000 + 25",
            model,
            lambda m: generate(m, ids(1, 1000), 25),
            rf"prompt length 1000 \+ max_new_tokens 25 = 1025 > max_len {MAX}",
        ),
        (
            "max_new_tokens 0",
            model,
            lambda m: generate(m, ids(1, 5), 0),
            r"max_new_tokens must be an int >= 1, got 0",
        ),
        (
            "max_new_tokens True",
            model,
            lambda m: generate(m, ids(1, 5), True),
            r"max_new_tokens must be an int >= 1, got True",
        ),
        (
            "max_new_tokens 2.0",
            model,
            lambda m: generate(m, ids(1, 5), 2.0),
            r"max_new_tokens must be an int >= 1, got 2.0",
        ),
        (
            "pad_lens of 3 rows",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=torch.tensor([0, 1, 2])),
            r"pad_lens must be a tensor of shape \(2,\), got \(3,\)",
        ),
        (
            "pad_lens 2-D",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=torch.tensor([[0, 1]])),
            r"pad_lens must be a tensor of shape \(2,\), got \(1, 2\)",
        ),
        (
            "pad_lens a list",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=[0, 1]),
            r"pad_lens must be a torch.Tensor, got .* \(list\)",
        ),
        (
            "pad_lens floats",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=torch.tensor([0.0, 1.0])),
            r"pad_lens must be integers, got dtype torch.float32",
        ),
        (
            "pad_lens = T",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=torch.tensor([0, 6])),
            r"pad_lens holds 6: each row needs 0 <= pads < prompt length 6",
        ),
        (
            "pad_lens -1",
            model,
            lambda m: generate(m, ids(2, 6), 4, pad_lens=torch.tensor([-1, 0])),
            r"pad_lens holds -1: each row needs 0 <= pads",
        ),
        (
            "temperature -0.5",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=-0.5),
            r"temperature must be 0 \(greedy\) or a number in \[0.0001, 3.4e\+38\], got -0.5",
        ),
        (
            "temperature 1e-40",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=1e-40),
            r"temperature must be 0 \(greedy\) or a number in \[0\.0001",
        ),
        (
            "temperature 1e39",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=1e39),
            r"temperature must be 0 .*got 1e\+39: .*larger ones float32",
        ),
        (
            "temperature inf",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=float("inf")),
            r"temperature must be 0 .*got inf",
        ),
        (
            "temperature nan",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=float("nan")),
            r"temperature must be 0 .*got nan",
        ),
        (
            "temperature True",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=True),
            r"temperature must be a number, got True",
        ),
        (
            "temperature '0.5'",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature="0.5"),
            r"temperature must be a number, got '0.5'",
        ),
        (
            "top_k 0",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=1.0, top_k=0),
            rf"top_k must be None \(every id\) or an int in \[1, {V}\], got 0",
        ),
        (
            f"top_k {V + 1}",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=1.0, top_k=V + 1),
            rf"top_k must be None \(every id\) or an int in \[1, {V}\], got {V + 1}",
        ),
        (
            "top_k True",
            model,
            lambda m: generate(m, ids(1, 4), 2, temperature=1.0, top_k=True),
            rf"top_k must be None \(every id\) or an int in \[1, {V}\], got True",
        ),
        (
            "eos_id True",
            model,
            lambda m: generate(m, ids(1, 4), 2, eos_id=True),
            r"eos_id True outside",
        ),
        (
            "eos_id 101.5",
            model,
            lambda m: generate(m, ids(1, 4), 2, eos_id=101.5),
            r"eos_id 101.5 outside",
        ),
        (
            "seed 2**70",
            model,
            lambda m: generate(m, ids(1, 4), 2, seed=2**70),
            r"seed must be None or an int in \[0, 2\*\*63\)",
        ),
        (
            "seed -1",
            model,
            lambda m: generate(m, ids(1, 4), 2, seed=-1),
            r"seed must be None or an int",
        ),
        (
            "seed True",
            model,
            lambda m: generate(m, ids(1, 4), 2, seed=True),
            r"seed must be None or an int",
        ),
        (
            "a model on meta",
            model,
            lambda m: generate(Transformer(m.cfg).to("meta"), ids(1, 4), 2),
            r"the model is on the meta device",
        ),
        (
            "not a model",
            model,
            lambda m: generate(torch.nn.Linear(2, 2), ids(1, 4), 2),
            r"model must be a tinyllm Transformer, got Linear",
        ),
    ],
    "the model's forward": [
        ("id 999", model, lambda m: m(torch.tensor([[999]])), r"idx holds token id 999"),
        ("a list", model, lambda m: m([1, 2]), r"idx must be \(B, T\), got shape list"),
    ],
    "prefill and decode_step": [
        (
            "a cache of fewer layers",
            model,
            lambda m: prefill(m, ids(1, 5), StaticKVCache(2, 1, 64, "cpu").prefilling()),
            r"the cache has 2 layers, the model 4",
        ),
        (
            "a fixed cache itself",
            model,
            lambda m: prefill(m, ids(1, 5), StaticKVCache(4, 1, 64, "cpu")),
            r"cache must follow the cache protocol, got .*\(StaticKVCache\): "
            r"pass its prefilling\(\)",
        ),
        (
            "a prompt longer than the slot",
            model,
            lambda m: prefill(m, ids(1, 65), SlotKVCache(4, 2, 64, "cpu").prefilling(0)),
            r"prompt length 65 \+ max_new_tokens 0 = 65 > max_len 64",
        ),
        (
            "a cache longer than the model",
            model,
            lambda m: prefill(m, ids(1, 5), StaticKVCache(4, 1, 2000, "cpu").prefilling()),
            rf"cache max_len 2000 > max_seq_len {MAX}",
        ),
        (
            f"tok {V}",
            model,
            lambda m: decode_step(m, KVCache(4), torch.tensor([[5], [V]])),
            rf"tok holds token id {V}, outside the vocabulary",
        ),
        (
            "tok floats",
            model,
            lambda m: decode_step(m, KVCache(4), torch.tensor([[5.0]])),
            r"tok must hold integer token ids, got dtype torch.float32",
        ),
        (
            "tok (2,)",
            model,
            lambda m: decode_step(m, KVCache(4), torch.tensor([5, 6])),
            r"tok must have shape \(B, 1\), got \(2,\)",
        ),
        (
            "tok sparse",
            model,
            lambda m: decode_step(m, KVCache(4), sparse_ids()),
            r"tok must be a dense tensor",
        ),
        (
            "tok on meta",
            model,
            lambda m: decode_step(m, KVCache(4), meta_ids()),
            r"tok is on the meta device",
        ),
    ],
    "KVCache": [
        ("n_layers 0", model, lambda m: KVCache(0), r"n_layers must be an int in \[1, 64\], got 0"),
        (
            "n_layers -1",
            model,
            lambda m: KVCache(-1),
            r"n_layers must be an int in \[1, 64\], got -1",
        ),
        (
            "pad_lens a list",
            model,
            lambda m: KVCache(4, [0, 1]),
            r"pad_lens must be a torch.Tensor, got .* \(list\)",
        ),
        (
            "pad_lens 2-D",
            model,
            lambda m: KVCache(4, torch.zeros(2, 2, dtype=torch.long)),
            r"pad_lens must be a tensor of shape \(B,\), got \(2, 2\)",
        ),
        (
            "pad_lens floats",
            model,
            lambda m: KVCache(4, torch.tensor([0.5])),
            r"pad_lens must be integers, got dtype torch.float32",
        ),
        (
            "pad_lens negative",
            model,
            lambda m: KVCache(4, torch.tensor([0, -2])),
            r"pad_lens holds -2: each row needs 0 <= pads",
        ),
    ],
    "StaticKVCache": [
        (
            "batch 0",
            model,
            lambda m: StaticKVCache(4, 0, 64, "cpu"),
            r"batch must be an int in \[1, 1024\], got 0",
        ),
        (
            "batch 10**6",
            model,
            lambda m: StaticKVCache(4, 10**6, 64, "cpu"),
            r"batch must be an int in \[1, 1024\], got 1000000",
        ),
        (
            "max_len -1",
            model,
            lambda m: StaticKVCache(4, 1, -1, "cpu"),
            r"max_len must be an int in \[1, 8192\], got -1",
        ),
        (
            "max_len 10**12",
            model,
            lambda m: StaticKVCache(4, 1, 10**12, "cpu"),
            r"max_len must be an int in \[1, 8192\], got 1000000000000",
        ),
        (
            "device 'gpu0'",
            model,
            lambda m: StaticKVCache(4, 1, 64, "gpu0"),
            r"device 'gpu0' is not a torch device",
        ),
        (
            "device meta",
            model,
            lambda m: StaticKVCache(4, 1, 64, "meta"),
            r"device meta: the course runs on 'cpu' or 'cuda'",
        ),
        (
            "limits of another kind",
            model,
            lambda m: StaticKVCache(4, 1, 64, "cpu", limits={"rows": 5}),
            r"limits must be a tinyllm.validate.Limits, got .* \(dict\)",
        ),
        (
            "reset(pads of 3 rows)",
            model,
            lambda m: StaticKVCache(4, 2, 64, "cpu").reset(torch.tensor([0, 1, 2])),
            r"pad_lens must be a tensor of shape \(2,\)",
        ),
        (
            "reset(pads past max_len)",
            model,
            lambda m: StaticKVCache(4, 2, 64, "cpu").reset(torch.tensor([0, 64])),
            r"pad_lens holds 64",
        ),
        (
            "prefilling() at position 5",
            static,
            lambda d: d.cache.prefilling(),
            r"StaticKVCache prefills from position 0, it holds 5: reset\(\)",
        ),
        (
            "decoding(window 65)",
            static,
            lambda d: d.cache.decoding(65),
            r"window 65 outside \[1, max_len 64\]",
        ),
        (
            "restore(n 99)",
            static,
            lambda d: d.cache.restore({"n": 99, "pad_lens": None}),
            r"snapshot position 99 outside \[0, max_len 64\]",
        ),
        (
            "restore(pads of 1 row)",
            static,
            lambda d: d.cache.restore({"n": 5, "pad_lens": [0]}),
            r"snapshot pad_lens \[0\]: 2 ints >= 0 expected",
        ),
        (
            "restore(no n)",
            static,
            lambda d: d.cache.restore({"pad_lens": None}),
            r"a snapshot\(\) of this cache",
        ),
    ],
    "SlotKVCache": [
        (
            "n_layers 0",
            model,
            lambda m: SlotKVCache(0, 2, 64, "cpu"),
            r"n_layers must be an int in \[1, 64\], got 0",
        ),
        (
            "n_slots 0",
            model,
            lambda m: SlotKVCache(4, 0, 64, "cpu"),
            r"n_slots must be an int in \[1, 1024\], got 0",
        ),
        (
            "prefilling(slot True)",
            slots,
            lambda d: d.cache.prefilling(True),
            r"slot True outside \[0, 4\)",
        ),
        ("prefilling(slot 4)", slots, lambda d: d.cache.prefilling(4), r"slot 4 outside \[0, 4\)"),
        (
            "prefilling(slot -1)",
            slots,
            lambda d: d.cache.prefilling(-1),
            r"slot -1 outside \[0, 4\)",
        ),
        (
            "prefilling(a slot in use)",
            slots,
            lambda d: d.cache.prefilling(2),
            r"slot 2 is in use: release it first",
        ),
        ("release(-1)", slots, lambda d: d.cache.release(-1), r"slot -1 outside \[0, 4\)"),
        ("release(4)", slots, lambda d: d.cache.release(4), r"slot 4 outside \[0, 4\)"),
        (
            "restore(3 slots)",
            slots,
            lambda d: d.cache.restore(SlotKVCache(4, 3, 64, "cpu").snapshot()),
            r"a snapshot of 3 rows, this cache has 4",
        ),
        (
            "restore(length 99)",
            slots,
            lambda d: d.cache.restore(with_length(d.cache.snapshot(), 99)),
            r"snapshot length 99 outside \[0, max_len 64\]",
        ),
        (
            "restore(a string)",
            slots,
            lambda d: d.cache.restore("lens"),
            r"a snapshot\(\) of this cache",
        ),
    ],
    "GraphDecoder": [
        (
            "batch True",
            model,
            lambda m: GraphDecoder(m, True, use_graph=False),
            r"batch must be an int in \[1, 1024\], got True",
        ),
        (
            "batch 10**6",
            model,
            lambda m: GraphDecoder(m, 10**6, use_graph=False),
            r"batch must be an int in \[1, 1024\], got 1000000",
        ),
        (
            "max_len 2000",
            model,
            lambda m: GraphDecoder(m, 2, max_len=2000, use_graph=False),
            rf"max_len must be an int in \[1, {MAX}\], got 2000",
        ),
        (
            "max_len 64.0",
            model,
            lambda m: GraphDecoder(m, 1, max_len=64.0, use_graph=False),
            rf"max_len must be an int in \[1, {MAX}\], got 64.0",
        ),
        (
            "use_graph 1",
            model,
            lambda m: GraphDecoder(m, 1, use_graph=1),
            r"use_graph must be None, True or False, got 1",
        ),
        (
            "use_graph on the CPU",
            model,
            lambda m: GraphDecoder(m, 2),
            r"CUDA graphs need a model on a CUDA device, this one is on cpu; use use_graph=False",
        ),
        (
            "graph_api a string",
            model,
            lambda m: GraphDecoder(m, 2, graph_api="cuda"),
            r"graph_api must be torch.cuda or tinyllm.lab.simgraph",
        ),
        (
            "buckets 128",
            model,
            lambda m: GraphDecoder(m, 1, buckets=128, use_graph=False),
            r"buckets must be a tuple of positive ints, got 128",
        ),
        (
            "buckets (True, 1024)",
            model,
            lambda m: GraphDecoder(m, 1, buckets=(True, 1024), use_graph=False),
            r"buckets must be positive ints",
        ),
        (
            "buckets ending short",
            model,
            lambda m: GraphDecoder(m, 2, max_len=256, buckets=(64, 128), use_graph=False),
            r"largest bucket 128 < max_len 256: the buckets must end at max_len",
        ),
        (
            "buckets ending long",
            model,
            lambda m: GraphDecoder(m, 2, max_len=256, buckets=(128, 512), use_graph=False),
            r"largest bucket 512 > max_len 256",
        ),
        (
            "compile 'yes'",
            model,
            lambda m: GraphDecoder(m, 1, use_graph=False, compile="yes"),
            r"compile must be False, True or a dict",
        ),
        (
            "compile on the CPU",
            model,
            lambda m: GraphDecoder(m, 2, use_graph=False, compile=True),
            r"compile=True compiles the step for a CUDA device, the model is on cpu; "
            r"on the CPU compile must be False",
        ),
        (
            "a model on meta",
            model,
            lambda m: GraphDecoder(Transformer(m.cfg).to("meta"), 1, use_graph=False),
            r"the model is on the meta device",
        ),
    ],
    "GraphDecoder.prefill and generate": [
        ("batch 3 for 2", static, lambda d: d.prefill(ids(3, 5)), r"batch 3 != decoder batch 2"),
        (
            "T 65",
            static,
            lambda d: d.prefill(ids(2, 65)),
            r"prompt length 65 \+ max_new_tokens 0 = 65 > max_len 64",
        ),
        (
            f"id {V}",
            static,
            lambda d: d.prefill(ids(2, 5, lo=V, hi=V + 1)),
            rf"idx holds token id {V}, outside",
        ),
        (
            "pads = T",
            static,
            lambda d: d.prefill(ids(2, 5), pad_lens=torch.tensor([0, 5])),
            r"pad_lens holds 5: each row needs 0 <= pads < prompt length 5",
        ),
        (
            "generate past max_len",
            static,
            lambda d: d.generate(ids(2, 60), 5),
            r"prompt length 60 \+ max_new_tokens 5 = 65 > max_len 64",
        ),
        (
            "generate(seed -1)",
            static,
            lambda d: d.generate(ids(2, 6), 5, seed=-1),
            r"seed must be None",
        ),
    ],
    "a decoder's step": [
        (
            "before prefill",
            lambda m: GraphDecoder(m, 2, max_len=64, buckets=(32, 64), use_graph=False),
            lambda d: d.step(ids(2, 1)),
            r"call prefill\(idx\) before step\(tok\)",
        ),
        (
            "tok (3, 1)",
            static,
            lambda d: d.step(ids(3, 1)),
            r"tok must have shape \(2, 1\), got \(3, 1\)",
        ),
        ("tok (2,)", static, lambda d: d.step(ids(2)), r"tok must have shape \(2, 1\), got \(2,\)"),
        (
            "tok floats",
            static,
            lambda d: d.step(ids(2, 1).float()),
            r"tok must hold integer token ids, got dtype torch.float32",
        ),
        (
            f"tok {V}",
            static,
            lambda d: d.step(torch.tensor([[5], [V]])),
            rf"tok holds token id {V}, outside the vocabulary",
        ),
        (
            "tok -2",
            static,
            lambda d: d.step(torch.tensor([[-2], [5]])),
            r"tok holds token id -2, outside the vocabulary",
        ),
        (
            "a step past max_len",
            full_static,
            lambda d: d.step(ids(1, 1)),
            r"KV cache full: the next step needs 41 keys > max_len 40",
        ),
        (
            "slot tok (3, 1)",
            slots,
            lambda d: d.step(ids(3, 1)),
            r"tok must have shape \(4, 1\), got \(3, 1\)",
        ),
        (
            "slot tok doubles",
            slots,
            lambda d: d.step(ids(4, 1).double()),
            r"got dtype torch.float64",
        ),
        (
            "slot tok -1",
            slots,
            lambda d: d.step(torch.tensor([[5], [-1], [0], [0]])),
            r"tok holds token id -1",
        ),
        (
            "capture(keys=128)",
            static,
            lambda d: d.capture(128),
            r"keys must be a tuple of graph keys, got 128",
        ),
        (
            "capture(keys=(100,))",
            static,
            lambda d: d.capture((100,)),
            r"graph key 100 is not one of \(32, 64\)",
        ),
        (
            "capture on the CPU",
            static,
            lambda d: d.capture(),
            r"CUDA graphs need a model on a CUDA device",
        ),
    ],
    "SlotGraphDecoder": [
        (
            "a static cache",
            model,
            lambda m: SlotGraphDecoder(m, StaticKVCache(4, 2, 64, "cpu"), use_graph=False),
            r"SlotGraphDecoder decodes a SlotKVCache, got StaticKVCache",
        ),
        (
            "a cache of fewer layers",
            model,
            lambda m: SlotGraphDecoder(m, SlotKVCache(2, 2, 64, "cpu"), use_graph=False),
            r"the cache has 2 layers, the model 4",
        ),
        (
            "a cache longer than the model",
            model,
            lambda m: SlotGraphDecoder(m, SlotKVCache(4, 2, 2000, "cpu"), use_graph=False),
            rf"cache max_len 2000 > max_seq_len {MAX}",
        ),
        (
            "use_graph on the CPU",
            model,
            lambda m: SlotGraphDecoder(m, SlotKVCache(4, 2, 64, "cpu")),
            r"CUDA graphs need a model on a CUDA device",
        ),
        (
            "compile on the CPU",
            model,
            lambda m: SlotGraphDecoder(
                m, SlotKVCache(4, 2, 64, "cpu"), use_graph=False, compile=True
            ),
            r"compile=True compiles the step for a CUDA device",
        ),
    ],
    "Engine": [
        (
            "n_slots True",
            model,
            lambda m: Engine(m, True),
            r"n_slots must be an int in \[1, 1024\], got True",
        ),
        (
            "n_slots 0",
            model,
            lambda m: Engine(m, 0),
            r"n_slots must be an int in \[1, 1024\], got 0",
        ),
        (
            "max_len 2000",
            model,
            lambda m: Engine(m, 2, max_len=2000),
            rf"max_len must be an int in \[2, {MAX}\], got 2000",
        ),
        (
            "buckets ending short",
            model,
            lambda m: Engine(m, 2, max_len=64, buckets=(16, 32)),
            r"largest bucket 32 < max_len 64",
        ),
        (
            f"eos_id {V}",
            model,
            lambda m: Engine(m, 2, eos_id=V),
            rf"eos_id {V} outside the vocabulary \[0, {V}\)",
        ),
        ("eos_id 101.5", model, lambda m: Engine(m, 2, eos_id=101.5), r"eos_id 101.5 outside"),
        (
            "use_graph 'no'",
            model,
            lambda m: Engine(m, 2, use_graph="no"),
            r"use_graph must be None, True or False",
        ),
        (
            "use_graph on the CPU",
            model,
            lambda m: Engine(m, 2, max_len=64, use_graph=True),
            r"CUDA graphs need a model on a CUDA device",
        ),
        (
            "compile on the CPU",
            model,
            lambda m: Engine(m, 2, max_len=64, compile=True),
            r"compile=True compiles the step for a CUDA device",
        ),
    ],
    "PagedEngine": [
        ("n_rows 0", model, lambda m: PagedEngine(m, 0), r"n_rows must be an int in \[1, 1024\]"),
        ("n_rows True", model, lambda m: PagedEngine(m, True), r"n_rows must be an int"),
        (
            "max_len 2000",
            model,
            lambda m: PagedEngine(m, 2, max_len=2000),
            rf"max_len must be an int in \[2, {MAX}\], got 2000",
        ),
        *(
            (
                f"prefill_chunk {chunk!r}",
                model,
                lambda m, chunk=chunk: PagedEngine(m, 2, use_graph=False, prefill_chunk=chunk),
                rf"prefill_chunk must be an int in \[1, 8192\], got {chunk!r}",
            )
            for chunk in (0, True, 8193, 16.0)
        ),
        (
            "prefill_graphs 'yes'",
            model,
            lambda m: PagedEngine(m, 2, use_graph=False, prefill_graphs="yes"),
            r"prefill_graphs must be True or False, got 'yes'",
        ),
        (
            "overlap 1",
            model,
            lambda m: PagedEngine(m, 2, use_graph=False, overlap=1),
            r"overlap must be True or False, got 1",
        ),
        (
            "capture sizes past the rows",
            model,
            lambda m: PagedEngine(m, 4, use_graph=False, capture_sizes=(2, 8)),
            r"the largest capture size 8 must be the rows, 4",
        ),
        (
            "use_graph on the CPU",
            model,
            lambda m: PagedEngine(m, 2, max_len=64, use_graph=True),
            r"CUDA graphs need a model on a CUDA device",
        ),
        (
            "compile on the CPU",
            model,
            lambda m: PagedEngine(m, 2, max_len=64, use_graph=False, compile=True),
            r"compile=True compiles the step for a CUDA device",
        ),
        (
            f"eos_id {V}",
            model,
            lambda m: PagedEngine(m, 2, use_graph=False, eos_id=V),
            rf"eos_id {V} outside the vocabulary \[0, {V}\)",
        ),
        (
            "capture without graphs",
            paged_engine,
            lambda e: e.capture(),
            r"CUDA graphs need a model on a CUDA device",
        ),
        ("submit []", paged_engine, lambda e: e.submit([], 4), r"empty prompt"),
        (
            "submit 60 + 5 > 64",
            paged_engine,
            lambda e: e.submit(list(range(60)), 5),
            r"prompt length 60 \+ max_new_tokens 5 > max_len 64",
        ),
        (
            "submit temperature -1",
            paged_engine,
            lambda e: e.submit([5], 4, temperature=-1.0),
            r"temperature",
        ),
    ],
    "PagedKVCache.fill": [
        ("rows 2", paged, lambda d: d.cache.fill(2, [4]), r"rows must be a non-empty list of ints"),
        ("a row outside", paged, lambda d: d.cache.fill([4], [4]), r"row 4 outside \[0, 4\)"),
        (
            "a count for each row",
            paged,
            lambda d: d.cache.fill([0, 2], [4]),
            r"lengths must be 2 ints, one a row, got \[4\]",
        ),
        ("count 0", paged, lambda d: d.cache.fill([1], [0]), r"length 0 outside \[1, max_len 64\]"),
        (
            "start -1",
            paged,
            lambda d: d.cache.fill([1], [4], -1),
            r"start must be an int in \[0, 63\], got -1",
        ),
        (
            "blocks not taken",
            paged,
            lambda d: d.cache.fill([0], [4]),
            r"fill needs the rows' blocks first",
        ),
        (
            "past the blocks taken",
            paged,
            lambda d: d.cache.fill([1], [4], 14),
            r"fill needs the rows' blocks first",
        ),
    ],
    "Engine.submit": [
        (
            "[]",
            engine,
            lambda e: e.submit([], 4),
            r"empty prompt: a request needs at least one token",
        ),
        (
            "an empty tensor",
            engine,
            lambda e: e.submit(torch.tensor([], dtype=torch.long), 4),
            r"empty prompt",
        ),
        (
            f"id {V}",
            engine,
            lambda e: e.submit([5, V], 4),
            rf"prompt_ids holds token id {V}, outside the vocabulary",
        ),
        (
            "id -1",
            engine,
            lambda e: e.submit([5, -1], 4),
            r"prompt_ids holds token id -1, outside the vocabulary",
        ),
        (
            "id 300 in a tensor",
            engine,
            lambda e: e.submit(torch.tensor([5, 300]), 4),
            r"prompt_ids holds token id 300",
        ),
        ("6.0", engine, lambda e: e.submit([5, 6.0], 4), r"prompt_ids must hold ints, got 6.0"),
        ("True", engine, lambda e: e.submit([5, True], 4), r"prompt_ids must hold ints, got True"),
        (
            "float tensor",
            engine,
            lambda e: e.submit(torch.tensor([5.0, 6.0]), 4),
            r"1-D integer tensor or a list of ints, got torch.float32 of shape \(2,\)",
        ),
        (
            "2-D tensor",
            engine,
            lambda e: e.submit(torch.tensor([[5, 6]]), 4),
            r"got torch.int64 of shape \(1, 2\)",
        ),
        (
            "bool tensor",
            engine,
            lambda e: e.submit(torch.tensor([True]), 4),
            r"prompt_ids must hold integer ids, got dtype torch.bool",
        ),
        (
            "sparse tensor",
            engine,
            lambda e: e.submit(ids(4).to_sparse(), 4),
            r"prompt_ids must be a dense tensor",
        ),
        (
            "meta tensor",
            engine,
            lambda e: e.submit(torch.zeros(3, dtype=torch.long, device="meta"), 4),
            r"prompt_ids is on the meta device",
        ),
        (
            "complex tensor",
            engine,
            lambda e: e.submit(ids(3).to(torch.complex64), 4),
            r"1-D integer tensor",
        ),
        (
            "'text'",
            engine,
            lambda e: e.submit("text", 3),
            r"prompt_ids must be a list of ints, got .* \(str\)",
        ),
        (
            "a dict",
            engine,
            lambda e: e.submit({5: 1, 6: 2}, 3),
            r"prompt_ids must be a list of ints, got .* \(dict\)",
        ),
        (
            "a set",
            engine,
            lambda e: e.submit({5, 6}, 3),
            r"prompt_ids must be a list of ints, got .* \(set\)",
        ),
        (
            "60 + 5 > 64",
            engine,
            lambda e: e.submit(list(range(60)), 5),
            r"prompt length 60 \+ max_new_tokens 5 > max_len 64",
        ),
        (
            "max_new_tokens 0",
            engine,
            lambda e: e.submit([5], 0),
            r"max_new_tokens must be an int >= 1, got 0",
        ),
        (
            "max_new_tokens True",
            engine,
            lambda e: e.submit([5], True),
            r"max_new_tokens must be an int >= 1, got True",
        ),
        (
            "temperature -1",
            engine,
            lambda e: e.submit([5], 4, temperature=-1.0),
            r"temperature must be 0 \(greedy\)",
        ),
        (
            "temperature 1e-40",
            engine,
            lambda e: e.submit([1, 2], 3, temperature=1e-40),
            r"temperature must be 0 \(greedy\)",
        ),
        (
            "top_k 0",
            engine,
            lambda e: e.submit([5], 4, top_k=0),
            rf"top_k must be None \(every id\) or an int in \[1, {V}\], got 0",
        ),
        (
            "seed 2**70",
            engine,
            lambda e: e.submit([1, 2], 3, seed=2**70),
            r"seed must be None or an int",
        ),
    ],
    "buckets": [
        (
            "default_buckets(0)",
            model,
            lambda m: default_buckets(0),
            r"max_len must be an int >= 1, got 0",
        ),
        (
            "default_buckets(100.0)",
            model,
            lambda m: default_buckets(100.0),
            r"max_len must be an int >= 1, got 100.0",
        ),
        (
            "first 0",
            model,
            lambda m: default_buckets(1024, 0),
            r"first bucket must be an int >= 1, got 0",
        ),
        (
            "growth 1",
            model,
            lambda m: default_buckets(1024, 128, 1),
            r"growth must be a number > 1, got 1",
        ),
        (
            "growth 0.5",
            model,
            lambda m: default_buckets(1024, 128, 0.5),
            r"growth must be a number > 1, got 0.5",
        ),
        (
            "growth True",
            model,
            lambda m: default_buckets(1024, 128, True),
            r"growth must be a number > 1, got True",
        ),
        (
            "growth 1 + 1e-12",
            model,
            lambda m: default_buckets(10**12, 1, 1 + 1e-12),
            r"gives more than 64 buckets below max_len 1000000000000",
        ),
        (
            "bucket_for past the end",
            model,
            lambda m: bucket_for(1025, (128, 1024)),
            r"1025 keys > largest bucket 1024",
        ),
        (
            "bucket_for unsorted",
            model,
            lambda m: bucket_for(5, (1024, 128)),
            r"buckets must be positive ints in ascending order, got \(1024, 128\)",
        ),
        (
            "bucket_for floats",
            model,
            lambda m: bucket_for(5, (128.0, 1024)),
            r"buckets must be positive ints",
        ),
        (
            "bucket_for negative",
            model,
            lambda m: bucket_for(5, (-1, 128)),
            r"buckets must be positive ints",
        ),
        (
            "bucket_for empty",
            model,
            lambda m: bucket_for(5, ()),
            r"buckets must be a non-empty tuple of ints, got \(\)",
        ),
        (
            "bucket_for n_keys 0",
            model,
            lambda m: bucket_for(0, (128,)),
            r"n_keys must be an int >= 1, got 0",
        ),
        (
            "bucket_for n_keys 2.5",
            model,
            lambda m: bucket_for(2.5, (128,)),
            r"n_keys must be an int >= 1, got 2.5",
        ),
    ],
    "Tokenizer": [
        (
            "decode([True])",
            model,
            lambda m: Tokenizer().decode([True]),
            r"token id True outside the vocabulary",
        ),
        (
            "decode([300])",
            model,
            lambda m: Tokenizer().decode([300]),
            r"token id 300 outside the vocabulary",
        ),
        ("decode([1.0])", model, lambda m: Tokenizer().decode([1.0]), r"token id 1.0 outside"),
        (
            "decode(a set)",
            model,
            lambda m: Tokenizer().decode({1, 2}),
            r"decode takes a list of int ids, got .* \(set\)",
        ),
        (
            "decode(a meta tensor)",
            model,
            lambda m: Tokenizer().decode(meta_ids()[0]),
            r"ids is on the meta device",
        ),
        (
            "encode(bytes)",
            model,
            lambda m: Tokenizer().encode(b"ab"),
            r"encode takes a str, got .* \(bytes\)",
        ),
    ],
    "the model and its config": [
        (
            "d_model 0",
            model,
            lambda m: ModelConfig(d_model=0),
            r"d_model must be an int >= 1, got 0",
        ),
        (
            "n_heads 3",
            model,
            lambda m: ModelConfig(n_heads=3),
            r"d_model 256 is not a multiple of n_heads 3",
        ),
        (
            "rope_theta 1",
            model,
            lambda m: ModelConfig(rope_theta=1),
            r"rope_theta must be a finite number > 1",
        ),
        (
            "a 600 M-parameter model",
            model,
            lambda m: Transformer(ModelConfig(vocab_size=2**17, d_model=2048)),
            r"parameters 6\d\d,\d{3},\d{3} > the course's limit 8,388,608; "
            r".*limits=Limits\(params=\.\.\.\)",
        ),
        (
            "max_seq_len 2**20",
            model,
            lambda m: Transformer(ModelConfig(max_seq_len=2**20)),
            r"max_seq_len 1,048,576 > the course's limit 8,192",
        ),
        (
            "1000 layers",
            model,
            lambda m: Transformer(
                ModelConfig(n_layers=1000, d_model=8, n_heads=2, n_kv_heads=1, ffn_hidden=16)
            ),
            r"n_layers 1,000 > the course's limit 64",
        ),
        (
            "cfg a dict",
            model,
            lambda m: Transformer({"d_model": 8}),
            r"cfg must be a ModelConfig, got dict",
        ),
    ],
    "load and save": [
        (
            "load(device 'gpu0')",
            model,
            lambda m: load(PRETRAINED, device="gpu0"),
            r"device 'gpu0' is not a torch device",
        ),
        (
            "load(device meta)",
            model,
            lambda m: load(PRETRAINED, device="meta"),
            r"device meta: the course runs on",
        ),
        (
            "load(limits a dict)",
            model,
            lambda m: load(PRETRAINED, limits={}),
            r"limits must be a tinyllm.validate.Limits",
        ),
        (
            "load(beyond the limits)",
            model,
            lambda m: load(PRETRAINED, limits=Limits(params=10**6)),
            r"tiny.safetensors: the config asks for parameters 3,280,128 "
            r"> the course's limit 1,000,000",
        ),
        (
            "save over the shipped weights",
            model,
            lambda m: save(m, PRETRAINED),
            r"is the shipped model: pass replace_shipped=True to overwrite it",
        ),
        (
            "save a Linear",
            model,
            lambda m: save(torch.nn.Linear(2, 2), "/tmp/x.safetensors"),
            r"save needs a tinyllm Transformer, got Linear",
        ),
    ],
}
CASES = [(door, *row) for door, rows in DOORS.items() for row in rows]


@pytest.fixture
def counted(shipped_model):
    """The shipped model with a counter of its embedding's calls (the model's first op)."""
    calls = []
    hook = shipped_model.tok_emb.register_forward_pre_hook(lambda mod, args: calls.append(1))
    yield shipped_model, calls
    hook.remove()


def positions(obj):
    cache = getattr(obj, "cache", None)
    return None if cache is None else (cache.snapshot(), cache.k[0] is not None)


@pytest.mark.parametrize("door, passed, setup, call, message", CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])  # fmt: skip
def test_a_bad_call_is_refused_before_any_work(counted, door, passed, setup, call, message):
    m, calls = counted
    obj = setup(m)
    n_calls, before = len(calls), positions(obj)
    with pytest.raises(ValueError, match=message):
        call(obj)
    if door != "the model's forward":  # (a forward call is itself the model's)
        assert len(calls) == n_calls, f"{door}: {passed}: the model ran before the error"
    assert positions(obj) == before, f"{door}: {passed}: the positions moved"


def test_the_doors_leave_a_decoder_that_still_works(shipped_model):
    dec = static(shipped_model)
    with pytest.raises(ValueError):
        dec.step(torch.tensor([[5], [V]]))
    dec.step(ids(2, 1))
    assert dec.cache.n == 6 == int(dec.cache.pos)
    dec = slots(shipped_model)
    with pytest.raises(ValueError):
        dec.step(ids(3, 1))
    dec.step(ids(4, 1))
    assert dec.cache.lens == [0, 0, 7, 0] == dec.cache.lens_dev.tolist()


def test_what_fits_exactly_is_accepted(shipped_model):
    """The limits are inclusive: a prompt that fills max_seq_len, any integer id dtype, a
    prompt that fills a slot."""
    assert generate(shipped_model, ids(1, MAX - 3), 3).shape == (1, 3)
    want = generate(shipped_model, ids(2, 5), 4)
    for dtype in (torch.uint8, torch.int16, torch.int32):
        assert torch.equal(generate(shipped_model, ids(2, 5).to(dtype), 4), want), dtype
    e = engine(shipped_model)
    rid = e.submit(list(range(60)), 4)
    assert len(e.run()[rid]) == 4


def test_a_caller_who_means_it_lifts_the_limits(shipped_model):
    cfg = ModelConfig(d_model=8, n_heads=2, n_kv_heads=1, ffn_hidden=8, n_layers=70, max_seq_len=16)
    assert len(Transformer(cfg, limits=Limits(layers=70)).blocks) == 70
    assert StaticKVCache(4, 2000, 8, "cpu", limits=Limits(rows=2000)).batch == 2000


def test_held_signals_nest_and_are_delivered_between_moves():
    """An inner hold (a move) ends without delivering; the outer hold (a run) delivers at
    deliver(), between moves, and goes on holding; its end delivers the rest and puts the
    handler back."""
    hits: list[int] = []

    def handler(signum, frame):
        hits.append(signum)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        with signals_held:
            with signals_held:  # a move inside the run
                os.kill(os.getpid(), signal.SIGALRM)
            assert hits == []
            signals_held.deliver()
            assert hits == [signal.SIGALRM]
            os.kill(os.getpid(), signal.SIGALRM)  # held again after deliver()
            assert hits == [signal.SIGALRM]
        assert hits == [signal.SIGALRM] * 2
        assert signal.getsignal(signal.SIGALRM) is handler
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_a_hold_in_another_thread_leaves_the_main_threads_alone():
    """Signals reach the main thread only: a worker's hold changes nothing, so a move of the
    main thread, begun while a worker holds, still installs its handlers and delivers."""
    import threading

    hits: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: hits.append(signum))
    inside, leave = threading.Event(), threading.Event()

    def worker():
        with signals_held:
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    try:
        inside.wait(5)
        with signals_held:
            os.kill(os.getpid(), signal.SIGALRM)
            assert hits == []
        assert hits == [signal.SIGALRM]
    finally:
        leave.set()
        t.join()
        signal.signal(signal.SIGALRM, previous)


LEFT_FROM_BEFORE = [  # (what, the call, the message): each a ValueError naming the value
    ("stop_at_eos 'no'", lambda m: tinyllm.complete(m, ["ab"], 2, stop_at_eos="no"),
     r"stop_at_eos must be True or False, got 'no'"),
    ("a meta model",
     lambda m: tinyllm.save(tinyllm.Transformer(m.cfg).to("meta"), "never.safetensors"),
     r"on the meta device"),
    ("get_config of a list", lambda m: tinyllm.get_config(["tiny"]), r"unknown preset \['tiny'\]"),
    ("a lone surrogate", lambda m: tinyllm.Tokenizer().encode("a\ud800b"), r"lone surrogate"),
    ("save to 5", lambda m: tinyllm.save(m, 5), r"path must be a str or a path, got 5"),
    ("load None", lambda m: tinyllm.load(None), r"path must be a str or a path"),
    ("pad_lens of 2 rows, a prompt of 1",
     lambda m: prefill(m, torch.tensor([[1, 2, 3]]), KVCache(m.cfg.n_layers, torch.tensor([0, 0]))),
     r"the cache's pad_lens hold 2 rows, the tokens 1"),
    ("a cache of 1 row, a token of 2", lambda m: decode_step(
        m, (c := KVCache(m.cfg.n_layers), prefill(m, torch.tensor([[1, 2]]), c))[0],
        torch.tensor([[1], [2]])), r"the cache holds 1 rows, the tokens 2"),
]  # fmt: skip


@pytest.mark.parametrize("what, call, message", LEFT_FROM_BEFORE,
                         ids=[c[0] for c in LEFT_FROM_BEFORE])  # fmt: skip
def test_the_doors_left_from_before_are_closed(shipped_model, what, call, message, tmp_path,
                                               monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message):
        call(shipped_model)
    assert not any(tmp_path.iterdir())  # nothing written
