"""Junk at every argument of the book's doors, one argument at a time: each call either works
or raises a ValueError that names the value it refused and what was expected, never another
exception, a crash or a hang (DESIGN, "Validation and failure"). The junk is what the audits
and the learners hand in: None, bools, negative and huge ints, NaN and inf, strings, bytes,
containers, tensors and numpy scalars."""

import math
import os

import numpy as np
import pytest
import torch

from tinyllm import Engine, PagedEngine, Tokenizer, complete, generate, get_config, load, save
from tinyllm.generation import decode_step, draw_seeds, prefill
from tinyllm.graphs import GraphDecoder, bucket_for, default_buckets, resolve_capture_sizes
from tinyllm.kv_cache import KVCache, SlotKVCache, StaticKVCache
from tinyllm.paged import PagedKVCache
from tinyllm.rows import Rows

JUNK = {
    "None": None, "True": True, "-1": -1, "0": 0, "2**63": 2**63, "1.5": 1.5,
    "nan": math.nan, "inf": math.inf, "'x'": "x", "b'x'": b"x", "[]": [], "['a']": ["a"],
    "{}": {}, "object()": object(), "tensor(1.5)": torch.tensor(1.5),
    "tensor([1, 2])": torch.tensor([1, 2]), "np.int64(3)": np.int64(3), "[2**63]": [2**63],
    "[-1]": [-1], "[1.5]": [1.5], "[None]": [None], "-10**30": -(10**30), "()": (),
    "[[1]]": [[1]],
}  # fmt: skip

# how a message may name each junk value: its repr, or what it is (a tensor by its dtype or
# shape, an empty container as empty, or as a count of 0)
NAMED = {
    "None": ("None",), "True": ("True",), "-1": ("-1",), "0": ("0",),
    "2**63": ("9223372036854775808",), "1.5": ("1.5",), "nan": ("nan",), "inf": ("inf",),
    "'x'": ("'x'",), "b'x'": ("b'x'",), "[]": ("[]", "()", "empty", "at least one", "got 0"),
    "['a']": ("'a'",), "{}": ("{}",), "object()": ("object",),
    "tensor(1.5)": ("tensor(1.5", "float32", "1.5", "()"),
    "tensor([1, 2])": ("tensor([1, 2]", "(2,)"),
    "np.int64(3)": ("3",), "[2**63]": ("9223372036854775808",), "[-1]": ("-1",),
    "[1.5]": ("1.5",), "[None]": ("None",), "-10**30": ("-1000000000000000000000000000000",),
    "()": ("()", "empty", "at least one", "got 0"), "[[1]]": ("[1]",),
}  # fmt: skip
# what a message says was expected: a bound, a kind, a list of choices
EXPECTED = ("must", "need", "take", "expected", "outside", "at most", "at least", "one of",
            "only", "<", ">", "[", "not a", "is not", "exceed")  # fmt: skip

# door → (a call of good arguments, as a dict, and the function that makes the call)
DOORS = {
    "Tokenizer.encode": ({"text": "ab"}, lambda m, a: Tokenizer().encode(**a)),
    "Tokenizer.decode": ({"ids": [97, 98]}, lambda m, a: Tokenizer().decode(**a)),
    "get_config": ({"name": "toy"}, lambda m, a: get_config(**a)),
    "bucket_for": ({"n_keys": 5, "buckets": (8, 16)}, lambda m, a: bucket_for(**a)),
    "default_buckets": ({"max_len": 64, "first": 16}, lambda m, a: default_buckets(**a)),
    "resolve_capture_sizes": ({"capture_sizes": (1, 2), "n_rows": 2},
                              lambda m, a: resolve_capture_sizes(**a)),
    "generate": ({"idx": torch.tensor([[97, 98]]), "max_new_tokens": 2, "temperature": 0.5,
                  "top_k": 5, "seed": 1, "eos_id": 3},
                 lambda m, a: generate(m, **a)),
    "Engine": ({"n_slots": 2, "max_len": 32, "use_graph": False},
               lambda m, a: Engine(m, **a)),
    "PagedEngine": ({"n_rows": 2, "max_len": 32, "prefill_chunk": 16, "overlap": False,
                     "use_graph": False, "eos_id": 3, "min_admit": 2},
                    lambda m, a: PagedEngine(m, **a)),
    "PagedEngine.submit": ({"prompt_ids": [97, 98], "max_new_tokens": 2, "temperature": 0.5,
                            "top_k": 5, "seed": 1},
                           lambda m, a: PagedEngine(m, 2, max_len=32, use_graph=False).submit(**a)),
    "PagedKVCache": ({"n_layers": 2, "n_rows": 2, "max_len": 32, "device": "cpu",
                      "block_size": 16}, lambda m, a: PagedKVCache(**a)),
    "Rows.take": ({"rows": [0], "n_positions": [5]},
                  lambda m, a: Rows(2, 32, "cpu").take(**a)),
    "Rows.release": ({"rows": [0]}, lambda m, a: Rows(2, 32, "cpu").release(**a)),
    "Rows.admit": ({"rows_in": [0], "lens": [5], "temperature": 0.5, "top_k": 3, "seed": 1},
                   lambda m, a: admitted(Rows(2, 32, "cpu"), **a)),
    "Rows.move": ({"src": [0], "dst": [1]},
                  lambda m, a: admitted(Rows(2, 32, "cpu"), [0], [5]).move(**a)),
    "Engine.submit": ({"prompt_ids": [97, 98], "max_new_tokens": 2, "temperature": 0.5,
                       "top_k": 5, "seed": 1},
                      lambda m, a: Engine(m, 2, max_len=32, use_graph=False).submit(**a)),
    "KVCache": ({"n_layers": 2, "pad_lens": torch.tensor([0, 1])},
                lambda m, a: KVCache(**a)),
    "prefill": ({"idx": torch.tensor([[97, 98]]), "cache": None},
                lambda m, a: prefill(m, a["idx"], KVCache(m.cfg.n_layers) if a["cache"] is None
                                       else a["cache"])),
    "decode_step": ({"tok": torch.tensor([[97]])},
                    lambda m, a: decode_step(m, prefilled(m), **a)),
    "GraphDecoder": ({"batch": 1, "max_len": 64, "buckets": None, "use_graph": False},
                     lambda m, a: GraphDecoder(m, **a)),
    "SlotKVCache": ({"n_layers": 2, "n_slots": 2, "max_len": 32, "device": "cpu"},
                    lambda m, a: SlotKVCache(**a)),
    "complete": ({"prompts": ["ab"], "max_new_tokens": 2, "temperature": 0.5, "top_k": 5,
                  "seed": 1, "stop_at_eos": True}, lambda m, a: complete(m, **a)),
    "Rows": ({"n_rows": 2, "max_len": 32, "device": "cpu", "block_size": 16, "n_blocks": 5},
             lambda m, a: Rows(**a)),
    "StaticKVCache": ({"n_layers": 2, "batch": 1, "max_len": 32, "device": "cpu"},
                      lambda m, a: StaticKVCache(**a)),
    "draw_seeds": ({"n": 2}, lambda m, a: draw_seeds(**a)),
    "save": ({"model": None, "path": "w.safetensors", "extra": {"a": 1}, "force": True},
             lambda m, a: save(m if a["model"] is None else a["model"], a["path"], a["extra"],
                               force=a["force"])),
    "load": ({"path": None, "device": "cpu", "expected_sha256": None},
             lambda m, a: load(saved(m) if a["path"] is None else a["path"],
                               a["expected_sha256"], a["device"])),
    "PagedEngine, graphs and limits": ({"capture_sizes": (1, 2), "prefill_graphs": True,
                                        "compile": False, "graph_api": torch.cuda},
                                       lambda m, a: PagedEngine(m, 2, max_len=32,
                                                                use_graph=False, **a)),
    "Engine, buckets and compile": ({"eos_id": 3, "buckets": (16, 32), "compile": False,
                                     "graph_api": torch.cuda},
                                    lambda m, a: Engine(m, 2, max_len=32, use_graph=False, **a)),
}  # fmt: skip


def saved(model) -> str:
    """The model saved once into the test's folder (the current one), its path."""
    if not os.path.exists("m.safetensors"):
        save(model, "m.safetensors")
    return "m.safetensors"


def prefilled(model):
    """A KVCache of one row, two positions in."""
    cache = KVCache(model.cfg.n_layers)
    prefill(model, torch.tensor([[97, 98]]), cache)
    return cache


def admitted(rows, rows_in=None, lens=None, **kwargs):
    """rows after take and admit of rows_in with lens (each checked by its door)."""
    rows.take(rows_in, lens)
    rows.admit(rows_in, lens, **kwargs)
    return rows


@pytest.mark.parametrize("door", DOORS)
def test_junk_at_a_door_is_a_value_error_or_works(toy_model, door, tmp_path, monkeypatch):
    """Every argument of the door, each junk value in turn (one loop a door: a test item a
    call would cost more than the calls). A refusal names the value and what was expected.
    Files a call writes land in the test's own folder."""
    monkeypatch.chdir(tmp_path)
    good, make_call = DOORS[door]
    wrong = []
    for arg in good:
        for junk, value in JUNK.items():
            try:
                make_call(toy_model, {**good, arg: value})
            except ValueError as e:
                message = str(e)
                if not any(name in message for name in NAMED[junk]):
                    wrong.append(f"{arg}={junk}: the message does not name it: {message:.100}")
                elif not any(word in message for word in EXPECTED):
                    wrong.append(f"{arg}={junk}: the message names no limit: {message:.100}")
            except Exception as e:  # anything else is a door left open
                wrong.append(f"{arg}={junk}: {type(e).__name__}: {str(e)[:80]}")
    assert not wrong, f"{door}: " + "; ".join(wrong)


def test_the_table_makes_at_least_two_thousand_calls():
    assert set(NAMED) == set(JUNK)
    assert sum(len(good) for good, _ in DOORS.values()) * len(JUNK) >= 2000
