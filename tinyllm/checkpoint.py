"""Weights on disk: safetensors only (a pickle can run code when loaded; safetensors cannot).

Tensors are stored in bf16 (half the bytes) and loaded in the compute dtype of the device
(precision.compute_dtype: bf16 on CUDA, fp32 on the CPU); the model's config travels
in the file's metadata, so a file is all it takes to rebuild the model.

A weights file is untrusted input. load() reads its header's length first and refuses a
header larger than the course's limit, then the header itself (the config, and each tensor's
name, dtype and shape, no weights): the config must be within the limits (parameters, layers,
positions: validate.Limits, which a caller who means more lifts), and the header must list
exactly the tensors that config needs, listed by a model built on the meta device. Only then
does it allocate anything; it reads the weights and refuses non-finite ones. Every refusal is
a ValueError that names the file, and comes in well under a second. save() checks as much
before it writes, so a file it wrote always loads back; it writes over an existing file only
when asked (force=True), never over the file the model was loaded from, and never over the
shipped weights (train.py's --replace-shipped does, on purpose).
"""

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from tinyllm.config import ModelConfig
from tinyllm.model import Transformer
from tinyllm.precision import compute_dtype, default_device
from tinyllm.validate import (
    LIMITS,
    shown,
    validate_bool,
    validate_device,
    validate_limits,
    validate_size,
)

WEIGHTS_DIR = Path(__file__).parent / "weights"
PRETRAINED = WEIGHTS_DIR / "tiny.safetensors"
MODEL_CARD = WEIGHTS_DIR / "MODEL_CARD.md"
WEIGHT_DTYPES = ("BF16", "F16", "F32")  # safetensors' names of the dtypes a weight may have
RESERVED_KEYS = ("config",)  # the metadata load() reads: save(extra=...) may not use them
CONFIG_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig))


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def as_path(path) -> Path:
    """path as a Path: a str or an os.PathLike, else a ValueError naming it."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or a path, got {path!r:.80}")
    return Path(path)


def same_file(a, b) -> bool:
    """Whether paths a and b lead to one file: the same path once links are followed, or, both
    existing, the same file on disk (os.path.samefile: a hard link too)."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def validate_output(path, flag: str, force: bool = False,
                    replace_shipped: bool | None = None) -> Path:  # fmt: skip
    """A file a command will write (flag: its option, for the message), checked before the
    command's work starts, so a run never ends with nowhere to write: a file name in an
    existing folder; not the shipped weights or model card, links and hard links included,
    unless replace_shipped (None: a command that never writes them); not an existing file
    unless force. Write it with write_whole."""
    path = as_path(path)
    shipped = next((s for s in (PRETRAINED, MODEL_CARD) if same_file(path, s)), None)
    if shipped is not None and not replace_shipped:
        how = "it is never written over here" if replace_shipped is None else (
            "pass --replace-shipped to overwrite it")  # fmt: skip
        raise ValueError(f"{flag} {path} is the shipped {shipped.name}: {how}")
    if path.resolve().is_dir() or not path.resolve().parent.is_dir():
        raise ValueError(f"{flag} {path}: not a file name in an existing folder")
    if path.exists() and shipped is None and not force:
        raise ValueError(f"{flag} {path} exists: pass --force to overwrite it")
    return path


def validate_outputs(parser, force: bool, outputs: dict, replace_shipped: bool | None = None):
    """The files a command will write ({flag: path}, None where not asked for), each its own
    file and each checked by validate_output, before the command's work starts; a bad one ends
    the command with its parser's error."""
    given = {flag: path for flag, path in outputs.items() if path is not None}
    for i, (flag, path) in enumerate(given.items()):
        same = next((f for f, p in list(given.items())[:i] if same_file(p, path)), None)
        if same is not None:
            parser.error(f"{flag} {path} is also {same}: give each output its own file")
    try:
        for flag, path in given.items():
            validate_output(path, flag, force, replace_shipped)
    except ValueError as e:
        parser.error(str(e))


def save(model: Transformer, path, extra: dict | None = None, replace_shipped: bool = False,
         force: bool = False) -> str:  # fmt: skip
    """Write the model's weights (bf16) and config, and `extra` (JSON values under keys of
    your own) in the metadata; returns the file's sha256. Everything is checked before a byte
    is written, and the file appears whole or not at all (written to a temporary file beside
    it, then renamed). An existing file is written over only with force=True, the shipped
    weights only with replace_shipped=True, and the file the model was loaded from never
    (links and hard links included)."""
    if not isinstance(model, Transformer):
        raise ValueError(f"save needs a tinyllm Transformer, got {shown(model)}")
    if any(p.is_meta for p in model.parameters()):
        raise ValueError("the model's weights are on the meta device, with no values: nothing "
                         "to save (load or train it first)")  # fmt: skip
    path = as_path(path)
    validate_bool("force", force)
    if path.is_dir() or not path.parent.is_dir():
        raise ValueError(f"cannot write {path}: not a file name in an existing folder")
    shipped = same_file(path, PRETRAINED)
    if shipped and replace_shipped is not True:
        raise ValueError(f"{path} is the shipped model: pass replace_shipped=True to overwrite it")
    source = getattr(model, "loaded_from", None)
    if source is not None and not shipped and same_file(path, source):
        raise ValueError(f"{path} is the file this model was loaded from: save it to another")
    if path.exists() and not shipped and force is not True:
        raise ValueError(f"{path} exists: pass force=True to overwrite it")
    if extra is not None and not isinstance(extra, dict):
        raise ValueError(f"extra must be a dict of JSON values, got {shown(extra)}")
    meta = {"config": json.dumps(model.cfg.to_dict())}
    for key, value in (extra or {}).items():
        if not isinstance(key, str):
            raise ValueError(f"extra keys must be strings, got {key!r}")
        if key in RESERVED_KEYS:
            raise ValueError(f"extra key {key!r} is reserved: load() reads it from the metadata")
        try:
            meta[key] = json.dumps(value, allow_nan=False)  # strict JSON: no NaN, no Infinity
        except (TypeError, ValueError) as e:
            raise ValueError(f"extra[{key!r}] is not JSON-serialisable: {e}") from None
    tensors = {
        k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in model.state_dict().items()
    }
    where = f"not saving {path.name}"
    validate_tensors(where, {k: ("BF16", tuple(v.shape)) for k, v in tensors.items()}, model.cfg)
    for name, t in tensors.items():
        validate_finite(where, name, t.float())  # as stored: a weight above ~3.39e38 rounds to inf
    write_whole(path, lambda partial: save_file(tensors, partial, metadata=meta))
    return sha256(path)


def write_whole(path: Path, write) -> None:
    """write(partial) fills a temporary file beside path, which is then renamed over path
    (os.replace): the file appears whole or not at all, a run stopped midway leaves the old
    one as it was, and a link at path is replaced, never written through."""
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(partial)
        os.chmod(partial, 0o666 & ~umask)  # as open() would make it, not mkstemp's 0o600
        os.replace(partial, path)
    finally:
        Path(partial).unlink(missing_ok=True)


def load(path, expected_sha256: str | None = None, device=None, limits=LIMITS) -> Transformer:
    """Rebuild a Transformer from a safetensors file, checking its sha256 first if given,
    with its parameters (and RoPE tables) in precision.compute_dtype(device): bf16 on
    CUDA, as stored, and fp32 on the CPU (device None: the CPU). A file that is not one
    save() wrote, is damaged, or asks for a model beyond `limits`, is refused with a
    ValueError that names it (and the tensor or key at fault)."""
    path, device = as_path(path), validate_device("cpu" if device is None else device)
    validate_limits(limits)
    if expected_sha256 is not None and not (
        isinstance(expected_sha256, str) and re.fullmatch(r"[0-9a-fA-F]{64}", expected_sha256)
    ):
        raise ValueError(f"expected_sha256 must be 64 hex digits, got {expected_sha256!r}")
    if not path.is_file():
        raise ValueError(f"no weights file at {str(path)!r}: path must name a file save() wrote")
    if expected_sha256 is not None:
        actual = sha256(path)
        if actual != expected_sha256.lower():
            raise ValueError(f"{path.name}: sha256 {actual} != expected {expected_sha256}")
    validate_header_length(path, limits.header_bytes)
    try:
        with safe_open(str(path), framework="pt") as f:
            cfg = config_from(path.name, f.metadata() or {}, limits)
            header = {}  # name → (dtype, shape), read from the header alone
            for name in f.keys():
                view = f.get_slice(name)
                header[name] = view.get_dtype(), tuple(view.get_shape())
            validate_tensors(path.name, header, cfg)  # before a single weight is read
            state = {}
            for name in header:
                state[name] = f.get_tensor(name).float()
                validate_finite(path.name, name, state[name])
    except SafetensorError as e:
        raise ValueError(f"{path.name} is not a valid safetensors file: {e}") from None
    model = Transformer(cfg, limits)
    model.load_state_dict(state)
    model = model.to(device=device, dtype=compute_dtype(device))  # the dtype it computes in
    model.loaded_from = path.resolve()  # save() never writes over it, from any folder
    return model.eval().requires_grad_(False)  # for inference


def validate_header_length(path: Path, limit: int) -> None:
    """Fail fast and clearly on a file that is not safetensors at all: the format opens with
    its header's length (8 bytes, little-endian), and the header must fit in the file, and
    within `limit` bytes (a header is parsed whole before any check of it can run)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
    if size < 8:
        raise ValueError(f"{path.name} holds {size} bytes: too short for a safetensors file")
    n = int.from_bytes(head, "little")
    if n > size - 8:
        hint = ""
        if head.startswith((b"PK\x03\x04", b"\x80")):  # a zip (torch.save) or a bare pickle
            hint = "; it looks like a pickle (torch.save), which tinyllm never loads"
        raise ValueError(
            f"{path.name} is not a safetensors file, or is truncated: its first 8 bytes "
            f"announce a header of {n} bytes, {size - 8} follow{hint}"
        )
    if n > limit:
        raise ValueError(
            f"{path.name}: its header of {n:,} bytes is larger than the limit of {limit:,} "
            f"(a caller who means it passes limits=Limits(header_bytes=...))"
        )


def config_from(where: str, meta: dict[str, str], limits=LIMITS) -> ModelConfig:
    """The config in a file's metadata: a JSON object with exactly ModelConfig's keys, whose
    values ModelConfig checks, asking for a model within the limits."""
    if "config" not in meta:
        raise ValueError(f"{where} has no model config in its metadata")
    try:
        d = json.loads(meta["config"])
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{where}: its config is not valid JSON ({e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{where}: its config must be a JSON object, got {type(d).__name__}")
    unknown, missing = sorted(set(d) - set(CONFIG_KEYS)), sorted(set(CONFIG_KEYS) - set(d))
    if unknown or missing:
        raise ValueError(f"{where}: config keys unknown {few(unknown)}, missing {few(missing)}")
    try:
        cfg = ModelConfig(**d)
    except ValueError as e:
        raise ValueError(f"{where}: config {e}") from None
    try:
        validate_size(cfg, limits)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return cfg


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name → shape of every tensor a model of this config stores, from a model built on the
    meta device: nothing is allocated, whatever sizes the config asks for. (torch computes
    on meta tensors in Python: the first build in a process imports torch._dynamo, 1-5 s.)"""
    with torch.device("meta"):
        return {k: tuple(v.shape) for k, v in Transformer(cfg).state_dict().items()}


def validate_tensors(where: str, found: dict[str, tuple[str, tuple[int, ...]]], cfg) -> None:
    """The tensors found (name → safetensors dtype, shape) are exactly those the config needs,
    each in a floating dtype."""
    if len(found) < cfg.n_layers:  # each layer stores tensors: refuse before building them
        raise ValueError(f"{where}: {len(found)} tensors, too few for n_layers {cfg.n_layers}")
    match_tensors(where, found, expected_shapes(cfg))


def match_tensors(where: str, found: dict[str, tuple[str, tuple[int, ...]]],
                  need: dict[str, tuple[int, ...]]) -> None:  # fmt: skip
    """The tensors found (name → safetensors dtype, shape) are exactly those needed (name →
    shape), each in a floating dtype; a ValueError naming the first that is not."""
    if set(found) != set(need):
        missing, unexpected = sorted(set(need) - set(found)), sorted(set(found) - set(need))
        raise ValueError(f"{where}: missing tensors {few(missing)}, unexpected {few(unexpected)}")
    for name, shape in need.items():
        dtype, got = found[name]
        if dtype not in WEIGHT_DTYPES:
            raise ValueError(
                f"{where}: tensor {name} has dtype {dtype}; weights are one of "
                f"{', '.join(WEIGHT_DTYPES)}"
            )
        if got != shape:
            raise ValueError(f"{where}: tensor {name} has shape {got}, the config needs {shape}")


# The largest weight a model can compute with: a product of two values larger than this, a
# weight and an activation, overflows float32 and bfloat16 (largest finite about 3.4e38).
MAX_WEIGHT = 1.8e19


def validate_finite(where: str, name: str, t: torch.Tensor) -> None:
    """No NaN or inf in t (in fp32: summing bf16 on the CPU is slow), and no weight beyond
    MAX_WEIGHT: finite, but its products overflow the dtypes the model computes in (the
    shipped model with every weight set to ±3e38 gave id 0 at each position of a prompt)."""
    if t.sum().isfinite() and t.abs().amax() <= MAX_WEIGHT:  # one pass each, the usual case
        return
    bad = int((~torch.isfinite(t)).sum())  # (or the sum overflowed: count them exactly)
    if bad:
        raise ValueError(f"{where}: tensor {name} holds {bad} non-finite values (NaN or inf)")
    big = float(t.abs().amax())
    if big > MAX_WEIGHT:
        raise ValueError(f"{where}: tensor {name} holds a weight of {big:.3g}, beyond "
                         f"{MAX_WEIGHT:g}: a product of two values that large overflows float32 "
                         f"and bfloat16, the dtypes the model computes in")  # fmt: skip


def few(names: list[str], n: int = 5) -> str:
    """At most n names: a hostile header can list thousands."""
    return str(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def card_sha256(card=None) -> str:
    """The sha256 recorded in the model card (its `| sha256 | ... |` row)."""
    card = card or MODEL_CARD
    m = re.search(r"\|\s*sha256\s*\|\s*`?([0-9a-f]{64})`?\s*\|", Path(card).read_text())
    if not m:
        raise ValueError(f"{card} records no sha256")
    return m.group(1)


def load_pretrained(device=None) -> Transformer:
    """The course's shipped model, checked against its model card, in eval mode."""
    device = default_device() if device is None else device
    return load(PRETRAINED, expected_sha256=card_sha256(), device=device)
