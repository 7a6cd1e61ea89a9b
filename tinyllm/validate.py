"""The armour at the doors: what users hand in is checked once, where they hand it in.

The doors are what a user calls directly: constructors (the model, caches, decoders, the
engine), prefill, generate, submit, release, load and save, bucket_for and the bucket
helpers. Each checks its arguments (types, shapes, dtypes, id ranges, lengths, devices,
sampling, seeds, a cache that fits its model) and raises a ValueError that names the value and
the limit, before any device work or large allocation: an out-of-range id that reaches a CUDA
kernel poisons the whole process. The per-step path behind the doors (a decoder's
step(tok, check=False), the model under a cache, the cache protocol) trusts what was checked
and reads like the recipe. Nothing is ever truncated or clamped, and a bool is never a number
here, even though Python counts True as 1.

Sizes are held to the course's limits (LIMITS: what its presets need, with room), so that a
typo or a hostile weights file cannot ask for gigabytes; a caller who means more passes
`limits=Limits(...)` to the door.

A step that does not finish (an exception, Ctrl-C) is undone by its level's transaction
(kv_cache.FixedCache.transaction, Engine.transaction), which runs with Ctrl-C held off
(signals_held), so that a second Ctrl-C or a timer cannot interrupt the undoing.
"""

import signal
import threading
from dataclasses import dataclass

import torch
from torch import Tensor

MIN_TEMPERATURE = 1e-4  # below it, logits / temperature overflows: use 0 (greedy) instead
MAX_TEMPERATURE = 3.4e38  # float32's largest finite value, about: sample divides in float32
SEED_LIMIT = 2**63  # seeds in [0, 2**63): an int64 keys the noise (generation.sample)


@dataclass(frozen=True)
class Limits:
    """The largest sizes the doors accept. The course's presets need 3.3 M parameters, 4
    layers, 1024 positions and batches of 64 at most; the defaults leave room."""

    params: int = 2**23  # parameters of a model (load() refuses a file that claims more)
    layers: int = 64
    seq_len: int = 8192  # max_seq_len of a model, max_len of a cache
    rows: int = 1024  # a cache's rows: a decoder's batch, the engine's slots
    buckets: int = 64  # graphs per decoder: each takes time to capture
    header_bytes: int = 2**20  # a weights file's header (the shipped one: about 4 KB)


LIMITS = Limits()


def shown(value) -> str:
    """A value as a refusal names it: its repr, cut short, and its type."""
    return f"{value!r:.60} ({type(value).__name__})"


def is_int(x) -> bool:
    """An int that is not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def validate_int(name: str, value, lo: int = 1, hi: int | None = None) -> None:
    if not is_int(value) or value < lo or (hi is not None and value > hi):
        limit = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be an int {limit}, got {value!r}")


def validate_block_size(block_size) -> None:
    """A paged cache's block size: a power of two in [1, 1024] (the decode kernel's tl.arange
    over a block needs a power of two)."""
    validate_int("block_size", block_size, hi=1024)
    if block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two (the kernel's tl.arange over a "
                         f"block needs one), got {block_size}")  # fmt: skip


def validate_limits(limits) -> Limits:
    if not isinstance(limits, Limits):
        raise ValueError(f"limits must be a tinyllm.validate.Limits, got {shown(limits)}")
    return limits


def validate_size(cfg, limits: Limits = LIMITS) -> None:
    """A model config within the limits: its parameters (counted from its shapes, nothing
    built), layers and positions."""
    validate_limits(limits)
    d, hd = cfg.d_model, cfg.head_dim
    block = d * (cfg.n_heads + 2 * cfg.n_kv_heads) * hd + cfg.n_heads * hd * d
    block += 3 * d * cfg.ffn_hidden + 2 * d  # SwiGLU, two norms
    params = 2 * cfg.vocab_size * d + cfg.n_layers * block + d  # embedding, LM head, final norm
    for name, value, field in (
        ("parameters", params, "params"),
        ("n_layers", cfg.n_layers, "layers"),
        ("max_seq_len", cfg.max_seq_len, "seq_len"),
    ):
        limit = getattr(limits, field)
        if value > limit:
            raise ValueError(
                f"the config asks for {name} {value:,} > the course's limit {limit:,}; "
                f"a caller who means it passes limits=Limits({field}=...)"
            )


def canonical(device) -> torch.device:
    """A device with its index: "cuda" is the current GPU, cuda:0 on one GPU, so that it
    compares equal to the device a tensor reports."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def validate_device(device) -> torch.device:
    """`device` as a torch.device that holds tensors here (canonical: "cuda" is cuda:0 on one
    GPU): the CPU, or CUDA when torch sees a GPU (meta holds no weights)."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {device!r} is not a torch device, e.g. 'cpu' or 'cuda'") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device}: torch sees no CUDA device")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {device}: the course runs on 'cpu' or 'cuda'")
    return canonical(device)


def validate_model(model) -> torch.device:
    """A tinyllm Transformer with weights; returns its device."""
    from tinyllm.model import Transformer

    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a tinyllm Transformer, got {shown(model)}")
    device = next(model.parameters()).device
    if device.type == "meta":
        raise ValueError("the model is on the meta device, without weights: load them first")
    return device


def validate_tensor(t, name: str) -> None:
    """A dense tensor with values (not sparse, not on meta)."""
    if not isinstance(t, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {shown(t)}")
    if t.layout != torch.strided:
        raise ValueError(f"{name} must be a dense tensor, got layout {t.layout}")
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device and holds no values")


def validate_ids(idx, vocab_size: int, device, name: str = "idx") -> None:
    """idx: a tensor of integer token ids in [0, vocab_size), on device. Any integer dtype
    is accepted (the model casts it); a bool, float or complex tensor is not."""
    validate_tensor(idx, name)
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer token ids, got dtype {idx.dtype}")
    if idx.device != canonical(device):
        raise ValueError(f"{name} is on {idx.device}, the model on {device}: move it first")
    if idx.numel():
        lo, hi = (int(x) for x in torch.aminmax(idx))  # a reduction reads ids, never indexes
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{name} holds token id {bad}, outside the vocabulary [0, {vocab_size})"
            )


def validate_token_list(ids, vocab_size: int, name: str = "prompt_ids") -> list[int]:
    """A list or tuple of int ids (or a 1-D integer tensor) in [0, vocab_size), as a list."""
    if isinstance(ids, Tensor):
        validate_tensor(ids, name)
        if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype.is_complex:
            raise ValueError(
                f"{name} must be a 1-D integer tensor or a list of ints, "
                f"got {ids.dtype} of shape {tuple(ids.shape)}"
            )
        if ids.dtype == torch.bool:
            raise ValueError(f"{name} must hold integer ids, got dtype {ids.dtype}")
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise ValueError(f"{name} must be a list of ints, got {shown(ids)}")
    for t in ids:
        if not is_int(t):
            raise ValueError(f"{name} must hold ints, got {t!r}")
        if not 0 <= t < vocab_size:
            raise ValueError(f"{name} holds token id {t}, outside the vocabulary [0, {vocab_size})")
    return list(ids)


def validate_pad_lens(pad_lens, B: int | None = None, T: int | None = None, device=None) -> None:
    """pad_lens (B,): integers >= 0, each below the prompt length T (every row keeps a real
    token), on device; B, T and device are checked where given."""
    validate_tensor(pad_lens, "pad_lens")
    if pad_lens.dim() != 1 or (B is not None and pad_lens.shape != (B,)):
        want = f"({B},)" if B is not None else "(B,)"
        raise ValueError(f"pad_lens must be a tensor of shape {want}, got {tuple(pad_lens.shape)}")
    if (
        pad_lens.dtype.is_floating_point
        or pad_lens.dtype.is_complex
        or pad_lens.dtype == torch.bool
    ):
        raise ValueError(f"pad_lens must be integers, got dtype {pad_lens.dtype}")
    if device is not None and pad_lens.device != canonical(device):
        raise ValueError(f"pad_lens is on {pad_lens.device}, idx on {device}")
    if pad_lens.numel():
        lo, hi = (int(x) for x in torch.aminmax(pad_lens))
        if lo < 0 or (T is not None and hi >= T):
            raise ValueError(
                f"pad_lens holds {lo if lo < 0 else hi}: each row needs 0 <= pads"
                + (f" < prompt length {T}" if T is not None else "")
            )


def validate_prompt(idx, model, max_new_tokens: int = 0, pad_lens=None, max_len=None) -> None:
    """Shapes, ids, pads and lengths of a (B, T) prompt that will grow by max_new_tokens,
    against max_len (default the model's max_seq_len)."""
    cfg, device = model.cfg, validate_model(model)
    max_len = max_len or cfg.max_seq_len
    validate_ids(idx, cfg.vocab_size, device)
    if idx.dim() != 2:
        raise ValueError(f"idx must be (B, T), got shape {tuple(idx.shape)}")
    B, T = idx.shape
    if B < 1 or T < 1:
        raise ValueError(f"empty prompt: idx has shape {tuple(idx.shape)}")
    validate_int("max_new_tokens", max_new_tokens, lo=0)
    if T + max_new_tokens > max_len:
        raise ValueError(
            f"prompt length {T} + max_new_tokens {max_new_tokens} = "
            f"{T + max_new_tokens} > max_len {max_len}"
        )
    if pad_lens is not None:
        validate_pad_lens(pad_lens, B, T, idx.device)


def validate_sampling(temperature: float, top_k, vocab_size: int, seed=None) -> None:
    """temperature 0 (greedy) or a number in [MIN_TEMPERATURE, MAX_TEMPERATURE]; top_k None or
    an int in [1, vocab_size]; seed None or an int in [0, SEED_LIMIT)."""
    if seed is not None and (not is_int(seed) or not 0 <= seed < SEED_LIMIT):
        raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"temperature must be a number, got {temperature!r}")
    if temperature != 0 and not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE:  # NaN too
        raise ValueError(
            f"temperature must be 0 (greedy) or a number in [{MIN_TEMPERATURE}, "
            f"{MAX_TEMPERATURE:g}], got {temperature!r}: smaller ones overflow the logits (use 0 "
            f"for the top token), larger ones float32, in which the logits are divided"
        )
    if top_k is not None and (not is_int(top_k) or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be None (every id) or an int in [1, {vocab_size}], "
                         f"got {top_k!r}")  # fmt: skip


def validate_eos(eos_id, vocab_size: int) -> None:
    if eos_id is not None and (not is_int(eos_id) or not 0 <= eos_id < vocab_size):
        raise ValueError(f"eos_id {eos_id!r} outside the vocabulary [0, {vocab_size}) of ints")


def validate_generate_args(
    max_new_tokens, temperature: float, top_k, vocab_size: int, seed=None, eos_id=None
) -> None:
    validate_int("max_new_tokens", max_new_tokens)
    validate_sampling(temperature, top_k, vocab_size, seed)
    validate_eos(eos_id, vocab_size)


def validate_cache(cache, model, protocol: bool = False) -> int | None:
    """A cache (or a fixed cache's step) that fits the model it meets: as many layers, on
    the model's device, no more positions than the model's; with protocol=True, one the model
    can be called with (KVCache, or a fixed cache's prefilling() / decoding(window) step).
    Returns the positions it holds (None: it grows)."""
    n_layers, device = model.cfg.n_layers, validate_model(model)
    if protocol and not all(hasattr(cache, m) for m in ("begin_step", "layer", "end_step")):
        hint = (": pass its prefilling() or decoding(window) step" if hasattr(cache, "prefilling")
                else "")  # fmt: skip
        raise ValueError(f"cache must follow the cache protocol, got {shown(cache)}{hint}")
    owner = getattr(cache, "cache", cache)  # a step's cache
    if not hasattr(owner, "n_layers"):
        raise ValueError(f"cache must be a tinyllm cache, got {shown(cache)}")
    if owner.n_layers != n_layers:
        raise ValueError(f"the cache has {owner.n_layers} layers, the model {n_layers}")
    max_len = getattr(owner, "max_len", None)
    if max_len is None:
        return None
    if canonical(owner.device) != device:
        raise ValueError(f"the cache is on {owner.device}, the model on {device}")
    if max_len > model.cfg.max_seq_len:
        raise ValueError(f"cache max_len {max_len} > max_seq_len {model.cfg.max_seq_len}")
    return max_len


# --- the graph decoders' arguments ---------------------------------------------------------


def validate_use_graph(use_graph, device: torch.device, graph_api) -> bool:
    """use_graph True or False, or None: graphs when the model is on CUDA (returned as a
    bool). Graphs need CUDA unless graph_api simulates them."""
    if use_graph is None:
        return device.type == "cuda"
    if not isinstance(use_graph, bool):
        raise ValueError(f"use_graph must be None, True or False, got {use_graph!r}")
    for name in ("CUDAGraph", "graph", "graph_pool_handle", "Stream", "stream"):
        if not hasattr(graph_api, name):
            raise ValueError(
                f"graph_api must be torch.cuda or tinyllm.lab.simgraph, got {graph_api!r}"
            )
    if use_graph and device.type != "cuda" and graph_api is torch.cuda:
        raise ValueError(
            f"use_graph=True: CUDA graphs need a model on a CUDA device, this one is on "
            f"{device}; use use_graph=False to run the same static step eagerly (or, to try "
            f"capture and replay on a CPU, graph_api=tinyllm.lab.simgraph)"
        )
    return use_graph


def validate_graph_args(model, use_graph, compile, graph_api) -> bool:
    """A decoder's or an engine's graph arguments, checked before it builds anything: the
    model, compile and use_graph (returned as a bool)."""
    device = validate_model(model)
    validate_compile(compile, device)
    return validate_use_graph(use_graph, device, graph_api)


def validate_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def validate_compile(compile, device: torch.device) -> None:
    if compile is False:
        return
    if compile is not True and not isinstance(compile, dict):
        raise ValueError(
            f"compile must be False, True or a dict of torch.compile arguments, got {compile!r}"
        )
    if device.type != "cuda" and not (isinstance(compile, dict) and "backend" in compile):
        raise ValueError(
            f"compile={compile!r} compiles the step for a CUDA device, the model is on "
            f"{device}; on the CPU compile must be False, or a dict naming a torch.compile "
            f"backend"
        )


def validate_buckets(buckets, max_len: int, limits: Limits = LIMITS) -> tuple[int, ...]:
    """A bucket list: positive ints, sorted here, at most limits.buckets of them, the largest
    max_len."""
    if not isinstance(buckets, (tuple, list, range)):
        raise ValueError(f"buckets must be a tuple of positive ints, got {buckets!r}")
    buckets = tuple(buckets)
    if any(not is_int(b) or b < 1 for b in buckets):
        raise ValueError(f"buckets must be positive ints, got {buckets}")
    buckets = tuple(sorted(set(buckets)))
    if not buckets or len(buckets) > limits.buckets:
        raise ValueError(f"buckets must hold 1 to {limits.buckets} windows, got {len(buckets)}")
    if buckets[-1] != max_len:
        relation = "<" if buckets[-1] < max_len else ">"
        raise ValueError(
            f"largest bucket {buckets[-1]} {relation} max_len {max_len}: "
            f"the buckets must end at max_len"
        )
    return buckets


def validate_keys(keys, graph_keys: tuple[int, ...]) -> tuple[int, ...]:
    """Graph keys to capture: None (all of them) or some of graph_keys (windows or capture
    sizes)."""
    if keys is None:
        return graph_keys
    if isinstance(keys, (int, str, dict, set)) or not hasattr(keys, "__iter__"):
        raise ValueError(f"keys must be a tuple of graph keys, got {keys!r}")
    keys = tuple(keys)
    unknown = [k for k in keys if not is_int(k) or k not in graph_keys]
    if unknown:
        raise ValueError(f"graph key {unknown[0]!r} is not one of {graph_keys}")
    return keys


def validate_capture_sizes(capture_sizes, n_rows: int) -> tuple[int, ...]:
    """Capture sizes: positive ints, sorted here, the largest n_rows (every row can run)."""
    if not isinstance(capture_sizes, (tuple, list, range)):
        raise ValueError(f"capture_sizes must be a tuple of positive ints, got {capture_sizes!r}")
    sizes = tuple(capture_sizes)
    if not sizes or any(not is_int(c) or c < 1 for c in sizes):
        raise ValueError(f"capture_sizes must be positive ints, got {capture_sizes!r:.60}")
    sizes = tuple(sorted(set(sizes)))
    if sizes[-1] != n_rows:
        raise ValueError(f"the largest capture size {sizes[-1]} must be the rows, {n_rows}")
    return sizes


# --- failure: a step is undone whole ---------------------------------------------------------


HELD_SIGNALS = (signal.SIGINT, signal.SIGALRM)  # Ctrl-C, and timers (setitimer, alarm)


class SignalsHeld:
    """Hold off Ctrl-C and timer signals for a block: `with signals_held:`. One that arrives
    inside it is recorded, and delivered to the handler that was in place when the block
    ends (as KeyboardInterrupt, or what a timer's handler raises). A turn that must be whole
    runs inside, so nothing but its own code can stop it halfway or interrupt its undo.

    Blocks nest: only the outermost installs and restores the handlers, so a turn inside a
    held loop costs nothing here. Such a loop calls deliver() between its turns: what arrived
    is delivered there, as if the hold had ended, and the hold goes on. Only the main thread
    receives signals, so elsewhere this does nothing."""

    def __init__(self):
        self.depth, self.caught, self.previous = 0, [], {}

    def catch(self, signum, frame) -> None:
        self.caught.append(signum)

    def __enter__(self) -> "SignalsHeld":
        if threading.current_thread() is threading.main_thread():  # the depth is its alone
            if self.depth == 0:
                self.previous = {sig: signal.signal(sig, self.catch) for sig in HELD_SIGNALS}
            self.depth += 1
        return self

    def __exit__(self, *exc) -> None:
        if threading.current_thread() is threading.main_thread():
            self.depth -= 1
            if self.depth == 0:
                self.release()

    def release(self) -> None:
        """The handlers put back, then each kind of signal caught delivered once, in order:
        raise_signal runs its handler at once, which may raise."""
        previous, self.previous = self.previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        caught, self.caught = self.caught, []
        for sig in dict.fromkeys(caught):
            signal.raise_signal(sig)

    def deliver(self) -> None:
        """Between two turns of the outermost block: deliver what arrived, then hold again."""
        if self.caught and self.depth == 1:
            self.release()  # a handler that raises stops the loop (nothing left to restore)
            self.previous = {sig: signal.signal(sig, self.catch) for sig in HELD_SIGNALS}


signals_held = SignalsHeld()  # one for the process: signal handlers are the process's
