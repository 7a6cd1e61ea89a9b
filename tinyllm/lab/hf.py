"""Hugging Face on both sides: the course's model as a transformers Llama, and back.

    hf = to_hf(model)                   # a transformers.LlamaForCausalLM, the same weights
    model = from_hf("path/to/folder")   # a Llama checkpoint (config.json + safetensors)
    model = from_hf(hf)                 # or a LlamaForCausalLM already in memory

The two models are one architecture written twice. The course fuses the query, key and value
projections into one GEMM (wqkv: the rows of q_proj, then k_proj, then v_proj) and gate and up
into another (w13: gate_proj's rows, then up_proj's); HF keeps them apart. Converting is
cutting those matrices into their row blocks, or stacking them. Nothing is permuted: both
models rotate the pairs (x_j, x_{j+D/2}) for RoPE (model.apply_rope; HF's rotate_half), so
the rows of q_proj and k_proj mean the same thing in both. tests/test_hf.py checks this on the
logits rather than taking it on trust: in fp32 on a CPU they agree to rounding (about 1e-6 of
the largest logit; the two sum in different orders) and give the same greedy tokens.

What the course model cannot express is refused, with a ValueError that names the config field
and its value: biases, scaled or partial RoPE, sliding windows, activations other than SiLU,
a head_dim that is not hidden_size / num_attention_heads, dropout, other model types. The
course's RMSNorm eps is fixed at 1e-5 (model.py; ModelConfig has no field for it, and adding
one would change the config that notebook 00 prints), so a checkpoint with another
rms_norm_eps (HF's own default is 1e-6) is refused too, not converted approximately. Tied
embeddings are welcome: the course model keeps its own LM head, which gets a copy of the
embedding.

from_hf never downloads. It reads a local folder, with json and safetensors only (a pickle,
pytorch_model.bin, can run code when loaded: it is refused, unread), and checks it as
checkpoint.load checks a weights file: the config first, within `limits` (the course's LIMITS
unless the caller lifts them: a 1 B model needs Limits(params=..., seq_len=...)), then each
tensor's name, dtype and shape from the headers, before a weight is read. The model comes back
on the CPU in fp32, in eval mode; its vocabulary is the checkpoint's, not the course tokenizer's.

transformers is an optional extra (pip install -e ".[hf]"): to_hf and from_hf of a model object
import it when called; reading a folder does not need it, and `import tinyllm.lab` never
imports it.
"""

import json
import os
import re
import sys
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from tinyllm.checkpoint import match_tensors, validate_finite, validate_header_length
from tinyllm.config import ModelConfig
from tinyllm.model import Transformer
from tinyllm.tokenizer import Tokenizer
from tinyllm.validate import LIMITS, shown, validate_limits, validate_model, validate_size

NORM_EPS = 1e-5  # the eps of every RMSNorm in model.py: fixed, ModelConfig has no field for it
INSTALL = 'pip install -e ".[hf]"'

# ModelConfig's sizes and the HF Llama config fields that hold them
SIZE_FIELDS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "ffn_hidden": "intermediate_size",
    "max_seq_len": "max_position_embeddings",
}

# HF config fields with the values the course model can take (an absent field counts as
# None: HF's default, except rms_norm_eps, whose default 1e-6 is not the course's), and what
# the course model has instead.
FEATURES = (
    ("hidden_act", ("silu",), "SwiGLU with SiLU"),
    ("attention_bias", (False, None), "no biases"),
    ("mlp_bias", (False, None), "no biases"),
    ("attention_dropout", (0, None), "no dropout"),
    ("pretraining_tp", (1, None), "one GEMM per projection"),
    ("rope_scaling", (None,), "plain RoPE, unscaled"),
    ("sliding_window", (None,), "full causal attention"),
    ("use_sliding_window", (False, None), "full causal attention"),
    ("quantization_config", (None,), "unquantized weights"),
    ("rms_norm_eps", (NORM_EPS,), f"RMSNorm with eps {NORM_EPS}, fixed in model.py"),
)
ROPE_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
HF_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False}


def require_transformers():
    """The transformers module, or an ImportError that says how to install it."""
    try:
        import transformers
    except ImportError as e:  # missing, or broken: say which, and how to install it
        raise ImportError(f"tinyllm.lab.hf needs transformers, an optional extra: {INSTALL} "
                          f"({e})") from e  # fmt: skip
    return transformers


# --- the names: which HF tensors make each of the course's ------------------------------------


def hf_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name → shape of every tensor of a LlamaForCausalLM with this config, untied."""
    d, f = cfg.d_model, cfg.ffn_hidden
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, d)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (q, d),
            p + "self_attn.k_proj.weight": (kv, d),
            p + "self_attn.v_proj.weight": (kv, d),
            p + "self_attn.o_proj.weight": (d, q),
            p + "post_attention_layernorm.weight": (d,),
            p + "mlp.gate_proj.weight": (f, d),
            p + "mlp.up_proj.weight": (f, d),
            p + "mlp.down_proj.weight": (d, f),
        }
    return shapes | {"model.norm.weight": (d,), "lm_head.weight": (cfg.vocab_size, d)}


def course_names(n_layers: int) -> dict[str, list[str]]:
    """The course's tensor name → the HF tensors stacked (by rows) to make it, in order."""
    names = {"tok_emb.weight": ["model.embed_tokens.weight"]}
    for i in range(n_layers):
        p, b = f"model.layers.{i}.", f"blocks.{i}."
        names |= {
            b + "attn_norm.weight": [p + "input_layernorm.weight"],
            b + "attn.wqkv.weight": [p + f"self_attn.{x}_proj.weight" for x in "qkv"],
            b + "attn.wo.weight": [p + "self_attn.o_proj.weight"],
            b + "ffn_norm.weight": [p + "post_attention_layernorm.weight"],
            b + "ffn.w13.weight": [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
            b + "ffn.w2.weight": [p + "mlp.down_proj.weight"],
        }
    return names | {"norm.weight": ["model.norm.weight"], "lm_head.weight": ["lm_head.weight"]}


# --- the course's model → transformers ----------------------------------------------------------


def hf_config(cfg: ModelConfig):
    """The transformers.LlamaConfig of a course model with this config."""
    transformers = require_transformers()
    tokenizer = Tokenizer()
    ours = cfg.vocab_size == tokenizer.vocab_size  # the course's byte vocabulary: name its ids
    return transformers.LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.ffn_hidden,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        hidden_act="silu",
        max_position_embeddings=cfg.max_seq_len,
        rms_norm_eps=NORM_EPS,
        rope_parameters={"rope_type": "default", "rope_theta": float(cfg.rope_theta)},
        tie_word_embeddings=False,  # the course model has its own LM head
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_id if ours else None,
        pad_token_id=tokenizer.pad_id if ours else None,
        architectures=["LlamaForCausalLM"],
    )


def to_hf(model: Transformer):
    """A transformers.LlamaForCausalLM with the weights of a course model, on its device, in
    its dtype, in eval mode: wqkv and w13 are cut into their row blocks, nothing else moves."""
    device = validate_model(model)
    transformers = require_transformers()
    cfg = model.cfg
    state = model.state_dict()
    hf_state = {}
    shapes = hf_shapes(cfg)
    for name, parts in course_names(cfg.n_layers).items():
        blocks = state[name].split([shapes[p][0] for p in parts])
        hf_state |= dict(zip(parts, blocks))
    dtype = model.tok_emb.weight.dtype
    hf = transformers.LlamaForCausalLM(hf_config(cfg)).to(device=device, dtype=dtype)
    hf.load_state_dict(hf_state)  # strict: every tensor named, each shape checked
    return hf.eval()


# --- transformers → the course's model ----------------------------------------------------------


def from_hf(model_or_local_dir, limits=LIMITS) -> Transformer:
    """A course Transformer (CPU, fp32, eval mode) from a Llama checkpoint: a local folder with
    config.json and safetensors weights (model.safetensors, or shards listed in
    model.safetensors.index.json), or a transformers.LlamaForCausalLM. It never downloads: a
    hub id is refused. Everything is checked before a weight is read (see the module's
    docstring); each refusal is a ValueError that names the field, tensor or file at fault."""
    validate_limits(limits)
    source = model_or_local_dir
    if isinstance(source, (str, os.PathLike)):
        folder = local_folder(source)
        where = folder.name or str(folder)
        cfg, tied = config_from_hf(where, read_json(folder / "config.json", limits), limits)
        return model_from(where, cfg, tied, FolderWeights(folder, limits), limits)
    # an HF model object: transformers is imported already, or this is no HF model
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(source, transformers.LlamaForCausalLM):
        raise ValueError(
            f"from_hf takes a local folder or a transformers.LlamaForCausalLM, got {shown(source)}"
        )
    if any(p.is_meta for p in source.parameters()):
        raise ValueError("the model's weights are on the meta device, with no values to convert")
    cfg, tied = config_from_hf("the model's config", source.config.to_dict(), limits)
    state = {k: v.detach() for k, v in source.state_dict().items()}
    return model_from("the model", cfg, tied, MemoryWeights(state), limits)


def local_folder(path) -> Path:
    """path as an existing folder, or a ValueError saying that only local folders are read."""
    folder = Path(path)
    if not folder.is_dir():
        raise ValueError(
            f"from_hf reads local folders only and never downloads: {str(path)!r} is not a "
            f"folder here. Download the checkpoint yourself (config.json and *.safetensors), "
            f"then pass its folder"
        )
    return folder


def read_json(path: Path, limits) -> dict:
    """A JSON object from a file no larger than a weights header may be."""
    if not path.is_file():
        raise ValueError(f"no {path.name} in {path.parent}: a Llama checkpoint folder has one")
    size = path.stat().st_size
    if size > limits.header_bytes:
        raise ValueError(
            f"{path.name}: {size:,} bytes, more than the limit of {limits.header_bytes:,} "
            f"(a caller who means it passes limits=Limits(header_bytes=...))"
        )
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path.name} is not valid JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path.name} must hold a JSON object, got {type(d).__name__}")
    return d


def config_from_hf(where: str, d: dict, limits) -> tuple[ModelConfig, bool]:
    """(ModelConfig, whether the embeddings are tied) from an HF config as a dict, refusing
    whatever the course model cannot express and any size beyond the limits."""
    if d.get("model_type") != "llama":
        raise ValueError(f"{where}: {field_shown(d, 'model_type')}; only 'llama' converts")
    architectures = d.get("architectures")
    if architectures not in (None, ["LlamaForCausalLM"]):
        raise ValueError(
            f"{where}: architectures={architectures!r}; only LlamaForCausalLM converts"
        )
    for field, allowed, instead in FEATURES:
        value = d.get(field, HF_DEFAULTS.get(field))
        if not takes(value, allowed):
            raise ValueError(f"{where}: {field_shown(d, field)}; the course model has {instead}")
    theta = rope_theta(where, d)
    sizes = {ours: d.get(theirs) for ours, theirs in SIZE_FIELDS.items()}
    if sizes["n_kv_heads"] is None:  # HF's default: as many K/V heads as query heads
        sizes["n_kv_heads"] = sizes["n_heads"]
    try:
        cfg = ModelConfig(**sizes, rope_theta=theta)
    except ValueError as e:
        raise in_hf_names(where, e) from None
    head_dim = d.get("head_dim")
    if head_dim is not None and head_dim != cfg.head_dim:
        raise ValueError(
            f"{where}: head_dim={head_dim!r}; the course model has hidden_size / "
            f"num_attention_heads = {cfg.head_dim}"
        )
    tied = d.get("tie_word_embeddings", HF_DEFAULTS["tie_word_embeddings"])
    if not isinstance(tied, bool):
        raise ValueError(f"{where}: tie_word_embeddings={tied!r}; it must be true or false")
    try:
        validate_size(cfg, limits)
    except ValueError as e:
        raise in_hf_names(where, e) from None
    return cfg, tied


def in_hf_names(where: str, e: ValueError) -> ValueError:
    """A refusal by ModelConfig or validate_size, which speak ModelConfig's names, with the
    names of the HF config fields those sizes were read from."""
    named = [
        f"{ours} is {theirs}"
        for ours, theirs in SIZE_FIELDS.items()
        if ours != theirs and re.search(rf"\b{ours}\b", str(e))
    ]
    return ValueError(f"{where}: {e}" + (f" ({', '.join(named)} here)" if named else ""))


def field_shown(d: dict, field: str) -> str:
    """A config field as a refusal names it: `field=value`, or absent and HF's default."""
    if field in d:
        return f"{field}={d[field]!r}"
    return f"{field} absent" + (
        f" (HF's default: {HF_DEFAULTS[field]!r})" if field in HF_DEFAULTS else ""
    )


def takes(value, allowed: tuple) -> bool:
    """Whether value is one of allowed: None and the bools by identity (0 is no false here),
    other values by equality (0.0 is 0), never a bool for a number."""
    return any(
        value is a
        if a is None or isinstance(a, bool)
        else value == a and not isinstance(value, bool)
        for a in allowed
    )


def rope_theta(where: str, d: dict) -> float:
    """RoPE's base from rope_parameters (transformers 5) or a top-level rope_theta (before),
    refusing any RoPE but the default one over the whole head."""
    rope = d.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"{where}: rope_parameters={rope!r}; it must be a JSON object")
    extra = sorted(set(rope) - ROPE_KEYS)  # per-layer tables, scaling factors, ...
    if extra:
        raise ValueError(f"{where}: rope_parameters holds {extra[0]}={rope[extra[0]]!r}; the "
                         f"course model has plain RoPE (rope_type 'default')")  # fmt: skip
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ValueError(f"{where}: rope_parameters has rope_type={kind!r}; the course model "
                         f"has plain RoPE (rope_type 'default')")  # fmt: skip
    if rope.get("partial_rotary_factor", 1) != 1:
        raise ValueError(f"{where}: partial_rotary_factor={rope['partial_rotary_factor']!r}; "
                         f"the course model rotates the whole head")  # fmt: skip
    theta = rope.get("rope_theta", d.get("rope_theta", HF_DEFAULTS["rope_theta"]))
    if isinstance(theta, int) and not isinstance(theta, bool):
        theta = float(theta)  # JSON writes 500000.0 as 500000
    return theta  # ModelConfig checks it: a finite number > 1


class MemoryWeights:
    """The tensors of an HF model in memory, behind the same two calls as a folder's."""

    def __init__(self, state: dict[str, torch.Tensor]):
        self.state = state

    def header(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        dtypes = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}
        return {
            k: (dtypes.get(v.dtype, str(v.dtype)), tuple(v.shape)) for k, v in self.state.items()
        }

    def read(self, names: list[str]) -> dict[str, torch.Tensor]:
        return {name: self.state[name].to("cpu", torch.float32) for name in names}


class FolderWeights:
    """The safetensors files of a checkpoint folder: one model.safetensors, or the shards that
    model.safetensors.index.json lists. A folder with only pickles is refused, unread."""

    def __init__(self, folder: Path, limits):
        index = folder / "model.safetensors.index.json"
        if index.is_file():
            weight_map = read_json(index, limits).get("weight_map")
            if not isinstance(weight_map, dict):
                raise ValueError(f"{index.name} has no weight_map object")
            files = sorted(set(map(str, weight_map.values())))
        elif (folder / "model.safetensors").is_file():
            files = ["model.safetensors"]
        else:
            pickles = sorted(
                p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth")
            )
            hint = (
                f"; {', '.join(pickles[:3])} is a pickle, which tinyllm never loads"
                if pickles
                else ""
            )
            raise ValueError(
                f"{folder.name}: no model.safetensors or model.safetensors.index.json{hint}"
            )
        for name in files:
            if Path(name).name != name or not (folder / name).is_file():
                raise ValueError(
                    f"{folder.name}: weights file {name!r} is not a file in the folder"
                )
            validate_header_length(folder / name, limits.header_bytes)
        self.paths = [folder / name for name in files]
        self.where = {}  # tensor name → the file that holds it

    def header(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        found = {}
        for path in self.paths:
            with self.opened(path) as f:
                for name in f.keys():
                    if name in found:
                        raise ValueError(f"{path.name}: tensor {name} is in two weights files")
                    view = f.get_slice(name)
                    found[name] = view.get_dtype(), tuple(view.get_shape())
                    self.where[name] = path
        return found

    def read(self, names: list[str]) -> dict[str, torch.Tensor]:
        tensors = {}
        for path in self.paths:
            with self.opened(path) as f:
                tensors |= {n: f.get_tensor(n).float() for n in names if self.where[n] == path}
        return tensors

    @staticmethod
    def opened(path: Path):
        try:
            return safe_open(str(path), framework="pt")
        except SafetensorError as e:
            raise ValueError(f"{path.name} is not a valid safetensors file: {e}") from None


def model_from(where: str, cfg: ModelConfig, tied: bool, weights, limits) -> Transformer:
    """Check the weights' names, dtypes and shapes against the config, then read them, stack
    them into the course's tensors and load those into a new Transformer."""
    found = {k: v for k, v in weights.header().items() if not k.endswith("rotary_emb.inv_freq")}
    need = hf_shapes(cfg)
    if tied:  # the LM head is the embedding: a file may list it or not
        del need["lm_head.weight"]
        found.pop("lm_head.weight", None)
    match_tensors(where, found, need)
    hf_state = weights.read(sorted(need))
    for name, t in hf_state.items():
        validate_finite(where, name, t)
    if tied:
        hf_state["lm_head.weight"] = hf_state["model.embed_tokens.weight"]
    state = {
        ours: torch.cat([hf_state[p] for p in parts])
        for ours, parts in course_names(cfg.n_layers).items()
    }
    model = Transformer(cfg, limits)
    model.load_state_dict(state)
    return model.eval().requires_grad_(False)
