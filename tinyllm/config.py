"""Model shapes. One dataclass, a few named presets; "tiny" is the model the course ships."""

from dataclasses import asdict, dataclass


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
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
