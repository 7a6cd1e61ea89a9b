"""gpt-fast's generate.py, written anew (see __init__.py): sampling, prefill, decode_one_token
and its decode loop, its Inductor settings, and the steps the course's bench times."""

import contextlib
import time
import types

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from tinyllm.lab.gptfast.model import Transformer, from_course
from tinyllm.validate import validate_ids

# generate.py main()'s sampling defaults
TEMPERATURE, TOP_K = 0.8, 200
# the Inductor settings generate.py sets at import (it leaves enable_autograd_cache commented out)
GENERATE_PY_INDUCTOR = {
    "coordinate_descent_tuning": True,
    "triton.unique_kernel_names": True,
    "fx_graph_cache": True,
}
# generate.py decodes under sdp_kernel(enable_flash=False, enable_mem_efficient=False,
# enable_math=True), which leaves these two on; math wins, "better for Inductor to codegen".
GENERATE_PY_SDPA = [SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION]
# calls before a reduce-overhead step replays: compile, cudagraph-tree warm-up, recording
WARMUP_CALLS = 3


def multinomial_sample_one_no_sync(probs: Tensor) -> Tensor:
    """One draw per row of probs with no host sync: the argmax of probs / Exp(1) noise, int32."""
    noise = torch.empty_like(probs).exponential_(1)
    return torch.argmax(probs / noise, dim=-1, keepdim=True).to(dtype=torch.int)


def logits_to_probs(logits: Tensor, temperature: float = 1.0, top_k: int | None = None) -> Tensor:
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[..., -1:]
        logits = torch.where(logits < kth, -float("inf"), logits)
    return F.softmax(logits, dim=-1)


def sample(
    logits: Tensor, temperature: float = 1.0, top_k: int | None = None
) -> tuple[Tensor, Tensor]:
    """logits (B, S, V) → next ids (B, 1) int32 from the last position, and their probs (B, V)."""
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    return multinomial_sample_one_no_sync(probs), probs


def prefill(model: Transformer, x: Tensor, input_pos: Tensor, **sampling_kwargs) -> Tensor:
    return sample(model(x, input_pos), **sampling_kwargs)[0]


def decode_one_token(
    model: Transformer, x: Tensor, input_pos: Tensor, **sampling_kwargs
) -> tuple[Tensor, Tensor]:
    """x (B, 1) at input_pos (1,) → next ids (B, 1), probs (B, V). generate.py compiles this."""
    if input_pos.shape[-1] != 1:
        raise ValueError(f"decode_one_token takes one position, got {input_pos.shape[-1]}")
    return sample(model(x, input_pos), **sampling_kwargs)


def model_forward(model: Transformer, x: Tensor, input_pos: Tensor) -> Tensor:
    return model(x, input_pos)


def own_copy(fn):
    """fn with a code object of its own. Dynamo keeps compiled graphs per code object, so a
    second torch.compile of the same function reuses the first one's graph whenever its
    guards pass, ignoring the Inductor settings and static addresses of the second build;
    each build of a step compiles its own copy instead (tests/test_gptfast.py)."""
    code = fn.__code__.replace()
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def compile_decode(mode: str = "reduce-overhead"):
    """generate.py's speed-up, in its one line (on a copy of decode_one_token: own_copy)."""
    return torch.compile(own_copy(decode_one_token), mode=mode, fullgraph=True)


def decode_next(
    decode, model: Transformer, cur_token: Tensor, input_pos: Tensor, **sampling_kwargs
) -> tuple[Tensor, Tensor]:
    """One pass of generate.py's decode loop: decode (decode_one_token, compiled or not) under
    its SDPA backends, input_pos += 1 on the device, and copies of the token and probs, since
    a CUDA graph's outputs are overwritten by its next replay."""
    with sdpa_kernel(GENERATE_PY_SDPA):
        next_token, next_prob = decode(model, cur_token, input_pos, **sampling_kwargs)
        input_pos += 1
    return next_token.clone(), next_prob.clone()


def decode_n_tokens(
    decode,
    model: Transformer,
    cur_token: Tensor,
    input_pos: Tensor,
    num_new_tokens: int,
    callback=None,
    **sampling_kwargs,
) -> tuple[list[Tensor], list[Tensor]]:
    """num_new_tokens passes of decode_next, each fed the token of the one before; the new
    tokens and their probs, as lists. callback(token) after each."""
    new_tokens, new_probs = [], []
    for _ in range(num_new_tokens):
        cur_token, prob = decode_next(decode, model, cur_token, input_pos, **sampling_kwargs)
        new_tokens.append(cur_token)
        new_probs.append(prob)
        if callback is not None:
            callback(cur_token)
    return new_tokens, new_probs


# --- Inductor settings, restored ----------------------------------------------------------


def _resolve(settings: dict) -> list[tuple[object, str, object]]:
    """(owner, name, value) per dotted torch._inductor.config key; ValueError on unknown keys."""
    out = []
    for key, value in settings.items():
        *parents, name = key.split(".")
        owner = torch._inductor.config
        for part in parents:  # "triton.enable_pdl": the triton section, then its entry
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, name):
            raise ValueError(
                f"unknown Inductor setting {key!r}: torch {torch.__version__} has no "
                f"torch._inductor.config.{key}"
            )
        out.append((owner, name, value))
    return out


@contextlib.contextmanager
def inductor_settings(settings: dict):
    """Set torch._inductor.config entries ("triton.unique_kernel_names": True, ...) for the
    duration, then put the previous values back. Every key is checked before any is set."""
    resolved = _resolve(settings)
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in resolved]
    try:
        for owner, name, value in resolved:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


# --- steps for the bench -------------------------------------------------------------------


def _check_args(model, idx, max_new_tokens, temperature, top_k, extra_inductor) -> None:
    validate_ids(idx, model.cfg.vocab_size, next(model.parameters()).device)
    if idx.dim() != 2 or idx.numel() == 0:
        raise ValueError(f"idx must be a non-empty (B, T), got shape {tuple(idx.shape)}")
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    T, block_size = idx.shape[1], model.cfg.max_seq_len
    if T + max_new_tokens > block_size:
        raise ValueError(
            f"prompt length {T} + max_new_tokens {max_new_tokens} = "
            f"{T + max_new_tokens} > block_size {block_size}"
        )
    if not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1, got {top_k!r}")
    _resolve(extra_inductor or {})


def _prepared_step(run, model, idx, max_new_tokens, settings, static_tables=False):
    """Prefill idx into gpt-fast's model, warm run(tok) up under the Inductor settings (it
    compiles and records there), rewind, and wrap it in the guards of a bench step."""
    B, T = idx.shape
    input_pos = torch.tensor([T], device=idx.device, dtype=torch.int)
    with torch.no_grad():
        model.setup_caches(
            max_batch_size=B, max_seq_length=min(T + max_new_tokens, model.config.block_size)
        )
        if static_tables:  # see make_decode_step
            for table in (model.freqs_cis, model.causal_mask):
                torch._dynamo.mark_static_address(table)
        first = prefill(model, idx, torch.arange(0, T, device=idx.device)).clone()  # (B, 1) int32
        with inductor_settings(settings):
            for _ in range(WARMUP_CALLS):  # each at position T: a short cache has no room past it
                input_pos.fill_(T)
                run(first, input_pos)
    input_pos.fill_(T)  # the first step writes position T again, over the warm-up's keys
    n_taken = 0

    def step(tok: Tensor):
        nonlocal n_taken
        if n_taken == max_new_tokens:
            raise ValueError(
                f"step {n_taken + 1} would write position {T + n_taken}, past the "
                f"cache: prompt length {T} + max_new_tokens {max_new_tokens}"
            )
        if tok.dtype != torch.int32 or tok.shape != (B, 1) or tok.device != idx.device:
            raise ValueError(
                f"tok must be int32 (B, 1) = ({B}, 1) on {idx.device}, as sample() "
                f"returns it (another dtype would recompile), got {tok.dtype} "
                f"{tuple(tok.shape)} on {tok.device}"
            )
        n_taken += 1
        with torch.no_grad():
            return run(tok, input_pos)

    return step


def _clock() -> float:
    """Host seconds, once the GPU (if any) has finished the work queued so far."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def make_decode_step(
    model,
    idx: Tensor,
    max_new_tokens: int,
    *,
    compile_mode: str | None = "reduce-overhead",
    temperature: float = TEMPERATURE,
    top_k: int | None = TOP_K,
    extra_inductor: dict | None = None,
    static_tables: bool = False,
):
    """gpt-fast verbatim: prefill idx (B, T) into gpt-fast's form of the course model, then
    step(tok) runs one pass of generate.py's decode loop (decode_one_token compiled with
    torch.compile(mode=compile_mode, fullgraph=True); None: not compiled) at the next position
    and returns what the loop keeps, (next token (B, 1) int32, probs (B, V)). tok is (B, 1)
    int32, as sample() returns it: a bench feeding a prompt token passes idx[:, -1:].int().

    step may be called max_new_tokens times, then raises: the cache is the one generate.py
    sizes for max_new_tokens new tokens (it feeds back only max_new_tokens - 1 of them).
    Inductor: generate.py's settings, then extra_inductor (e.g. {"max_autotune": True}); they
    hold while the step compiles and records, during setup. Returns (step, setup_s), setup_s
    covering conversion, prefill, compile and warm-up.

    static_tables: mark freqs_cis and causal_mask, which model.py keeps as plain attributes,
    as tensors at fixed addresses (torch._dynamo.mark_static_address). Without it, CUDAGraph
    Trees copy them, as inputs from eager, into the graph's placeholders before every replay,
    in the one torch._foreach_copy_ that also copies the token and the position. The bench
    runs both and takes the faster as gpt-fast's strongest form.

    Each call compiles its own copy of decode_one_token (own_copy), so steps built one after
    another never share a compiled graph."""
    _check_args(model, idx, max_new_tokens, temperature, top_k, extra_inductor)
    t0 = _clock()
    gf = from_course(model)
    decode = decode_one_token if compile_mode is None else compile_decode(compile_mode)

    def run(tok: Tensor, input_pos: Tensor) -> tuple[Tensor, Tensor]:
        return decode_next(decode, gf, tok, input_pos, temperature=temperature, top_k=top_k)

    step = _prepared_step(
        run, gf, idx, max_new_tokens, GENERATE_PY_INDUCTOR | (extra_inductor or {}), static_tables
    )
    return step, _clock() - t0


def make_forward_step(
    model,
    idx: Tensor,
    max_new_tokens: int,
    *,
    compile_mode: str | None = "reduce-overhead",
    extra_inductor: dict | None = None,
    static_tables: bool = False,
):
    """Like make_decode_step, but only the model forward is compiled (generate.py's
    model_forward, under the same mode and settings): step(tok) → logits (B, 1, V), with no
    sampling, as the course's own step returns them. Not gpt-fast verbatim: generate.py
    compiles model_forward only for speculative decoding. The logits are valid until the
    next call (a CUDA graph's output buffer)."""
    _check_args(model, idx, max_new_tokens, 0.0, None, extra_inductor)
    t0 = _clock()
    gf = from_course(model)
    forward = (
        model_forward
        if compile_mode is None
        else torch.compile(own_copy(model_forward), mode=compile_mode, fullgraph=True)
    )

    def run(tok: Tensor, input_pos: Tensor) -> Tensor:
        with sdpa_kernel(GENERATE_PY_SDPA):
            logits = forward(gf, tok, input_pos)
            input_pos += 1
        return logits

    step = _prepared_step(
        run, gf, idx, max_new_tokens, GENERATE_PY_INDUCTOR | (extra_inductor or {}), static_tables
    )
    return step, _clock() - t0


def make_ideal_step(model, idx: Tensor, max_new_tokens: int, *, extra_inductor: dict | None = None):
    """gpt-fast's model forward compiled with generate.py's Inductor settings (then
    extra_inductor), its kernels replayed from a CUDA graph captured by hand: the host's work
    per step is one token copy and one launch, an ideal host, where Dynamo's guards and
    CUDAGraph Trees' input copies are gone. Its cache is the one generate.py sizes,
    min(T + max_new_tokens, block_size) positions. step(tok) → logits (B, 1, V), valid until
    the next call; the position advances inside the graph. Returns (step, setup_s)."""
    _check_args(model, idx, max_new_tokens, 0.0, None, extra_inductor)
    t0 = _clock()
    gf = from_course(model)
    forward = torch.compile(own_copy(model_forward), fullgraph=True, dynamic=False)
    B, T = idx.shape
    input_pos = torch.tensor([T], device=idx.device, dtype=torch.int)
    with torch.no_grad():
        gf.setup_caches(
            max_batch_size=B, max_seq_length=min(T + max_new_tokens, gf.config.block_size)
        )
        tok = prefill(gf, idx, torch.arange(0, T, device=idx.device)).clone()  # (B, 1) int32
        with (
            inductor_settings(GENERATE_PY_INDUCTOR | (extra_inductor or {})),
            sdpa_kernel(GENERATE_PY_SDPA),
        ):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # compile and warm up, as any capture needs
                for _ in range(WARMUP_CALLS):
                    forward(gf, tok, input_pos)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                logits = forward(gf, tok, input_pos)
                input_pos += 1
    input_pos.fill_(T)
    n_taken = 0

    def step(new_tok: Tensor) -> Tensor:
        nonlocal n_taken
        if n_taken == max_new_tokens:
            raise ValueError(
                f"step {n_taken + 1} would write past the cache of {T + max_new_tokens}"
            )
        n_taken += 1
        tok.copy_(new_tok)
        graph.replay()
        return logits

    def reset() -> None:
        nonlocal n_taken
        input_pos.fill_(T)
        n_taken = 0

    step.reset = reset
    step.gf = gf  # the graph reads gf's weights and cache: they must live as long as the step
    return step, _clock() - t0
