"""Every precision and device choice in one place (notebooks 01 and 05).

A model computes in compute_dtype(its device): bf16 on CUDA (fp16 where the GPU has no
bf16), fp32 on the CPU. checkpoint.load returns its parameters in that dtype, so no step
re-casts a weight. autocast(...) is the context every forward runs in: it limits SDPA's
kernels on CUDA, and only an fp32 model on CUDA (one being trained) runs under bf16 autocast.
Eager generate, both graph decoders and the engine use the same weights and the same policy,
so comparing them measures masks and kernels, never a dtype.
"""

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

# cuDNN's attention builds a new execution plan for every new key length: with the dynamic
# cache of eager decode that is one plan per token, which would hide the launch overhead this
# course is about (the bench records an eager step with cuDNN allowed,
# "eager_with_cudnn_attention" in results/h200.json; notebook 02 prints it). The other three
# SDPA kernels have no per-shape set-up.
ATTENTION_BACKENDS = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU (every lesson runs on both)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def model_dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def compute_dtype(device) -> torch.dtype:
    """The dtype a model computes in on `device`: bf16 on CUDA (fp16 where the GPU lacks
    bf16), fp32 on the CPU."""
    if torch.device(device).type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@contextlib.contextmanager
def autocast(device, attention_backends=None, param_dtype=None):
    """The context every forward pass runs in. On the CPU: nothing (fp32). On CUDA: SDPA
    limited to attention_backends (default ATTENTION_BACKENDS), and, when the parameters
    (param_dtype, default fp32) are not in the compute dtype already, autocast to it.

    A model from load() is in the compute dtype and needs no autocast: under autocast every
    step would cast every weight again, and norms and softmax would round-trip through fp32.
    cache_enabled=False: autocast's cache of cast weights does not survive graph capture."""
    device = torch.device(device)
    if device.type != "cuda":
        yield
        return
    dtype = compute_dtype(device)
    backends = list(ATTENTION_BACKENDS if attention_backends is None else attention_backends)
    cast = (param_dtype or torch.float32) != dtype
    with (
        torch.autocast("cuda", dtype=dtype, cache_enabled=False, enabled=cast),
        sdpa_kernel(backends),
    ):
        yield


def activation_dtype(model) -> torch.dtype:
    """The dtype the model's activations, and so its keys and values, come out in: the
    compute dtype when autocast runs (an fp32 model on CUDA), else its parameters' dtype."""
    device, dtype = model_device(model), model_dtype(model)
    return compute_dtype(device) if device.type == "cuda" else dtype


def precision(model, attention_backends=None):
    """autocast(...) for this model: its device, its parameters' dtype."""
    return autocast(model_device(model), attention_backends, model_dtype(model))
