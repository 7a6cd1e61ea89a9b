"""Checking what users pass, before any device work.

An out-of-range id that reaches a CUDA kernel poisons the whole process (a device-side
assert ends every later CUDA call), so every public entry point checks ids, shapes,
lengths and arguments on the host first, and raises a ValueError that names the value and
the limit. Nothing is ever truncated or clamped: what does not fit is an error.
"""

import torch
from torch import Tensor


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def model_dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def check_ids(idx, vocab_size: int, device, name: str = "idx") -> None:
    if not isinstance(idx, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(idx).__name__}")
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {idx.dtype}")
    if idx.device != torch.device(device):
        raise ValueError(f"{name} is on {idx.device}, the model on {device}: move it first")
    if idx.numel():
        lo, hi = (int(x) for x in torch.aminmax(idx))  # a reduction reads ids, never indexes
        bad = lo if lo < 0 else hi
        if lo < 0 or hi >= vocab_size:
            raise ValueError(
                f"{name} holds token id {bad}, outside the vocabulary [0, {vocab_size})"
            )


def check_prompt(idx, model, max_new_tokens: int = 0, pad_lens=None, max_len=None) -> None:
    """Shapes, ids, pads and lengths of a (B, T) prompt that will grow by max_new_tokens,
    against max_len (default the model's max_seq_len)."""
    cfg, device = model.cfg, model_device(model)
    max_len = max_len or cfg.max_seq_len
    check_ids(idx, cfg.vocab_size, device)
    if idx.dim() != 2:
        raise ValueError(f"idx must be (B, T), got shape {tuple(idx.shape)}")
    B, T = idx.shape
    if B < 1 or T < 1:
        raise ValueError(f"empty prompt: idx has shape {tuple(idx.shape)}")
    if not is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if T + max_new_tokens > max_len:
        raise ValueError(
            f"prompt length {T} + max_new_tokens {max_new_tokens} = "
            f"{T + max_new_tokens} > max_len {max_len}"
        )
    if pad_lens is not None:
        if not isinstance(pad_lens, Tensor) or pad_lens.shape != (B,):
            got = tuple(pad_lens.shape) if isinstance(pad_lens, Tensor) else type(pad_lens).__name__
            raise ValueError(f"pad_lens must be a tensor of shape ({B},), got {got}")
        if pad_lens.dtype.is_floating_point or pad_lens.dtype == torch.bool:
            raise ValueError(f"pad_lens must be integers, got dtype {pad_lens.dtype}")
        if pad_lens.device != idx.device:
            raise ValueError(f"pad_lens is on {pad_lens.device}, idx on {idx.device}")
        lo, hi = (int(x) for x in torch.aminmax(pad_lens))
        if lo < 0 or hi >= T:
            raise ValueError(
                f"pad_lens holds {lo if lo < 0 else hi}: each row needs 0 <= pads "
                f"< prompt length {T}"
            )


def is_int(x) -> bool:
    """An int that is not a bool (True is an int to Python, never a count here)."""
    return isinstance(x, int) and not isinstance(x, bool)


def check_generate_args(
    max_new_tokens, temperature: float, top_k, vocab_size: int, seed=None, eos_id=None
) -> None:
    if not is_int(max_new_tokens) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    check_sampling(temperature, top_k, vocab_size, seed)
    if eos_id is not None and (not isinstance(eos_id, int) or not 0 <= eos_id < vocab_size):
        raise ValueError(f"eos_id {eos_id!r} outside the vocabulary [0, {vocab_size})")


def check_sampling(temperature: float, top_k, vocab_size: int, seed=None) -> None:
    if seed is not None and not is_int(seed):
        raise ValueError(f"seed must be an int or None, got {seed!r}")
    if not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be an int in [1, vocab_size {vocab_size}], got {top_k!r}")


# --- the graph decoders' arguments ---------------------------------------------------------


def check_use_graph(use_graph: bool, device: torch.device, graph_api) -> None:
    if use_graph and device.type != "cuda" and graph_api is torch.cuda:
        raise ValueError(
            f"CUDA graphs need a model on a CUDA device, this one is on {device}; use "
            f"use_graph=False to run the same static step eagerly (or, to try capture and "
            f"replay on a CPU, graph_api=tinyllm.lab.simgraph)"
        )


def check_fused(fused, device: torch.device) -> None:
    if fused is False:
        return
    if fused is not True and not isinstance(fused, dict):
        raise ValueError(
            f"fused must be False, True or a dict of torch.compile arguments, got {fused!r}"
        )
    if device.type != "cuda" and not (isinstance(fused, dict) and "backend" in fused):
        raise ValueError(
            f"fused={fused!r} compiles the step for a CUDA device, the model is on {device}; "
            f"leave fused=False on the CPU, or name a torch.compile backend in a dict"
        )


def check_windows(windows, buckets: tuple[int, ...]) -> tuple[int, ...]:
    if windows is None:
        return buckets
    unknown = [w for w in windows if w not in buckets]
    if unknown:
        raise ValueError(f"window {unknown[0]} is not one of the buckets {buckets}")
    return tuple(windows)
