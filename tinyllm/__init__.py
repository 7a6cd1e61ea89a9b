"""tinyllm: a small Llama-style model and the machinery that makes its decode fast.

Read the modules in this order: config → model → tokenizer → kv_cache → generation →
graphs → engine. The notebooks in ../notebooks walk through them one idea at a time.
"""

from tinyllm.checkpoint import load, load_pretrained, save
from tinyllm.config import ModelConfig, get_config
from tinyllm.engine import Engine
from tinyllm.generation import autocast, complete, generate
from tinyllm.graphs import GraphDecoder, SlotGraphDecoder, StaticKVCache, default_buckets
from tinyllm.kv_cache import KVCache, SlotKVCache
from tinyllm.model import Transformer
from tinyllm.tokenizer import Tokenizer

__all__ = [
    "Engine", "GraphDecoder", "KVCache", "ModelConfig", "SlotGraphDecoder", "SlotKVCache",
    "StaticKVCache", "Tokenizer", "Transformer", "autocast", "complete", "default_buckets",
    "generate", "get_config", "load", "load_pretrained", "save",
]
