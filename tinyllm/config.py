"""Model shapes. One dataclass, a few named presets; "tiny" is the model the course ships.

A config also arrives from a file (checkpoint.load reads it from a weights file's metadata),
so it checks itself: every size an int >= 1 and under the limits below, rope_theta a finite
number > 1, the heads dividing the width. The limits sit far above any model one GPU runs and
low enough that a hostile file cannot ask for absurd sizes: load() checks a file's config
before it builds anything.
"""

import sys
from dataclasses import asdict, dataclass

from tinyllm.checks import is_int

# Any one size: a vocabulary, width, head count, hidden size or context of about a million.
MAX_SIZE = 2**20
# Deeper than any published decoder (Llama 3.1 405B has 126 layers). load() builds every
# layer on the meta device, a few ms each, before it reads a weight.
MAX_LAYERS = 256
# Elements of the largest weight matrix: 4 GiB in bf16 (Llama 3.1 405B's embedding,
# 128256 × 16384, fits).
MAX_MATRIX = 2**31
# Elements of each RoPE table, max_seq_len × head_dim/2: built on load, not read from the
# file, so a small file must not be able to ask for a large one (Llama 3.1: 2**23).
MAX_ROPE = 2**24
SIZES = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden", "max_seq_len")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 258  # 256 bytes, then eos and pad (tokenizer.py)
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 4  # grouped-query attention: two query heads share one K/V head
    ffn_hidden: int = 768
    max_seq_len: int = 1024
    rope_theta: float = 10000.0

    def __post_init__(self):
        for name in SIZES:
            value, limit = getattr(self, name), MAX_LAYERS if name == "n_layers" else MAX_SIZE
            if not is_int(value) or not 1 <= value <= limit:
                raise ValueError(f"{name} must be an int in [1, {limit}], got {value!r}")
        # theta <= 1 turns the angles of every pair of dimensions the same way or faster:
        # the logits come out wrong, and nothing else complains
        theta = self.rope_theta
        if not (is_int(theta) or isinstance(theta, float)) or not 1 < theta <= sys.float_info.max:
            raise ValueError(f"rope_theta must be a finite number > 1, got {theta!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads {self.n_heads} is not a multiple of n_kv_heads {self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even for RoPE")
        widths = {  # the widest weight matrices, each d_model × width
            "vocab_size": self.vocab_size,  # the embedding and the LM head
            "2·ffn_hidden": 2 * self.ffn_hidden,  # w13
            "qkv width": (self.n_heads + 2 * self.n_kv_heads) * self.head_dim,  # wqkv
        }
        for name, width in widths.items():
            if self.d_model * width > MAX_MATRIX:
                raise ValueError(
                    f"d_model {self.d_model} × {name} {width} = {self.d_model * width} "
                    f"elements > {MAX_MATRIX} in one weight matrix"
                )
        rope = self.max_seq_len * self.head_dim // 2
        if rope > MAX_ROPE:
            raise ValueError(
                f"max_seq_len {self.max_seq_len} × head_dim/2 {self.head_dim // 2} = {rope} "
                f"elements > {MAX_ROPE} in a RoPE table"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


PRESETS = {
    # The shipped model: ~3.3 M parameters, small enough that its decode step is launch-bound.
    "tiny": ModelConfig(),
    # For tests and smoke runs on a CPU.
    "toy": ModelConfig(
        d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=128, max_seq_len=256
    ),
}


def get_config(name: str) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
