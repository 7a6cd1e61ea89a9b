"""tinyllm: a small Llama-style model and the machinery that makes its decode fast.

Read the modules in this order: config → model → tokenizer → kv_cache → rows → paged →
kernels → precision → generation → graphs → engine → serve (validate, checkpoint and train
beside them). The notebooks in
../notebooks walk through them one idea at a time. tinyllm.lab measures the book and
tinyllm.course holds the classroom (figures, explorers, exercise checkers); the book imports
neither.
"""

from tinyllm.checkpoint import load, load_pretrained, save
from tinyllm.config import ModelConfig, get_config
from tinyllm.engine import Engine
from tinyllm.generation import complete, generate
from tinyllm.graphs import GraphDecoder, SlotGraphDecoder, bucket_for, default_buckets
from tinyllm.kv_cache import KVCache, SlotKVCache, StaticKVCache
from tinyllm.model import Transformer
from tinyllm.paged import PagedKVCache
from tinyllm.precision import autocast
from tinyllm.rows import Rows
from tinyllm.serve import PagedEngine
from tinyllm.tokenizer import Tokenizer
from tinyllm.validate import Limits

__all__ = [
    "Engine",
    "GraphDecoder",
    "KVCache",
    "Limits",
    "ModelConfig",
    "PagedEngine",
    "PagedKVCache",
    "Rows",
    "SlotGraphDecoder",
    "SlotKVCache",
    "StaticKVCache",
    "Tokenizer",
    "Transformer",
    "autocast",
    "bucket_for",
    "complete",
    "default_buckets",
    "generate",
    "get_config",
    "load",
    "load_pretrained",
    "save",
]
