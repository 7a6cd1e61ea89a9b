"""Model shapes. One dataclass, a few named presets; "tiny" is the model the course ships.

A config also arrives from a file (checkpoint.load reads it from a weights file's metadata),
so it checks its own consistency: every size an int >= 1, rope_theta a finite number > 1,
the heads dividing the width. How large a model may be is the doors' concern
(validate.validate_size, against the course's limits), checked before anything is built.
"""

import sys
from dataclasses import asdict, dataclass

from tinyllm.validate import is_int

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
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
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
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
