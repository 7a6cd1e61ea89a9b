"""Checking what users pass, before any device work.

An out-of-range id that reaches a CUDA kernel poisons the whole process (a device-side
assert ends every later CUDA call), so every public entry point checks ids, shapes,
lengths and arguments on the host first, and raises a ValueError that names the value and
the limit. Nothing is ever truncated or clamped: what does not fit is an error. A bool is
never a number here, even though Python counts True as 1.
"""

import math

import torch
from torch import Tensor

MIN_TEMPERATURE = 1e-4  # below it, logits / temperature overflows: use 0 (greedy) instead
SEED_LIMIT = 2**63  # seeds in [0, 2**63), as torch.Generator.manual_seed takes them


def is_int(x) -> bool:
    """An int that is not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def check_int(name: str, value, lo: int = 1, hi: int | None = None) -> None:
    if not is_int(value) or value < lo or (hi is not None and value > hi):
        limit = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be an int {limit}, got {value!r}")


def model_device(model) -> torch.device:
    device = next(model.parameters()).device
    if device.type == "meta":
        raise ValueError("the model is on the meta device, without weights: load them first")
    return device


def model_dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def check_ids(idx, vocab_size: int, device, name: str = "idx") -> None:
    """idx: a tensor of integer token ids in [0, vocab_size), on device. Any integer dtype
    is accepted (the model casts it); a bool, float or complex tensor is not."""
    if not isinstance(idx, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(idx).__name__}")
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {idx.dtype}")
    if idx.device != torch.device(device):
        raise ValueError(f"{name} is on {idx.device}, the model on {device}: move it first")
    if idx.numel():
        lo, hi = (int(x) for x in torch.aminmax(idx))  # a reduction reads ids, never indexes
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
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
    check_int("max_new_tokens", max_new_tokens, lo=0)
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


def check_generate_args(
    max_new_tokens, temperature: float, top_k, vocab_size: int, seed=None, eos_id=None
) -> None:
    check_int("max_new_tokens", max_new_tokens)
    check_sampling(temperature, top_k, vocab_size, seed)
    check_eos(eos_id, vocab_size)


def check_eos(eos_id, vocab_size: int) -> None:
    if eos_id is not None and (not is_int(eos_id) or not 0 <= eos_id < vocab_size):
        raise ValueError(f"eos_id {eos_id!r} outside the vocabulary [0, {vocab_size}) of ints")


def check_sampling(temperature: float, top_k, vocab_size: int, seed=None) -> None:
    """temperature 0 (greedy) or a finite number >= MIN_TEMPERATURE; top_k None or an int in
    [1, vocab_size]; seed None or an int in [0, SEED_LIMIT)."""
    if seed is not None and (not is_int(seed) or not 0 <= seed < SEED_LIMIT):
        raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a number, got {temperature!r}")
    if temperature != 0 and not (math.isfinite(temperature) and temperature >= MIN_TEMPERATURE):
        raise ValueError(
            f"temperature must be 0 (greedy) or a finite number >= {MIN_TEMPERATURE}, got "
            f"{temperature!r}: smaller ones overflow the logits; use 0 for the top token"
        )
    if top_k is not None:
        check_int("top_k", top_k, hi=vocab_size)


# --- the graph decoders' arguments ---------------------------------------------------------


def check_use_graph(use_graph: bool, device: torch.device, graph_api) -> None:
    if not isinstance(use_graph, bool):
        raise ValueError(f"use_graph must be True or False, got {use_graph!r}")
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
    if isinstance(windows, (int, str)) or not hasattr(windows, "__iter__"):
        raise ValueError(f"windows must be a tuple of buckets, got {windows!r}")
    unknown = [w for w in windows if w not in buckets or not is_int(w)]
    if unknown:
        raise ValueError(f"window {unknown[0]!r} is not one of the buckets {buckets}")
    return tuple(windows)
