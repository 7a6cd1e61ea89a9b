"""tinyllm.lab.hf: the course's model as a transformers Llama and back, exact in fp32.

Exact means: the same logits up to fp32 rounding (torch's fp32 tolerance, atol 1e-5 and rtol
1.3e-6: the two models sum in different orders, the course through its fused wqkv and w13)
and the same greedy tokens, on the shipped model and on random HF Llamas of each shape the
course model can take (GQA, MHA, one K/V head; tied and untied embeddings; another
rope_theta). A wrong row block or a permuted RoPE pair would be off by far more. Every config
the course model cannot express, and every bad weights folder, is refused with a ValueError
that names the field or tensor; nothing is downloaded and no pickle is read.
"""

import json
import pickle
import re
import socket
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

transformers = pytest.importorskip("transformers")

from tinyllm import Limits, Tokenizer, generate  # noqa: E402
from tinyllm.lab.hf import NORM_EPS, from_hf, to_hf  # noqa: E402

FP32 = {"atol": 1e-5, "rtol": 1.3e-6}  # torch.testing's default tolerance for float32


def logits_of(model, hf, idx) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        return model(idx)[0], hf(idx).logits


def hf_greedy(hf, idx, n: int) -> torch.Tensor:
    """n greedy tokens from the HF model, the whole sequence recomputed each step: no HF cache
    or generation config in the way."""
    with torch.no_grad():
        for _ in range(n):
            idx = torch.cat([idx, hf(idx).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx[:, -n:]


def assert_same_model(model, hf, idx, n_new: int = 12) -> float:
    """Logits within fp32 rounding and identical greedy tokens; returns the max |logit diff|."""
    ours, theirs = logits_of(model, hf, idx)
    torch.testing.assert_close(ours, theirs, **FP32)
    assert torch.equal(generate(model, idx, n_new), hf_greedy(hf, idx, n_new))
    return float((ours - theirs).abs().max())


# --- the shipped model → transformers → back ------------------------------------------------


@pytest.fixture(scope="module")
def shipped_hf(shipped_model):
    return to_hf(shipped_model)


def test_the_shipped_model_as_hf_gives_its_logits_and_tokens(shipped_model, shipped_hf):
    cfg, hf_cfg = shipped_model.cfg, shipped_hf.config
    assert (hf_cfg.num_attention_heads, hf_cfg.num_key_value_heads) == (cfg.n_heads, cfg.n_kv_heads)
    assert hf_cfg.rope_parameters["rope_theta"] == cfg.rope_theta
    assert hf_cfg.rms_norm_eps == shipped_model.norm.eps == NORM_EPS
    assert hf_cfg.tie_word_embeddings is False and hf_cfg.vocab_size == cfg.vocab_size
    assert not any(".bias" in k for k in shipped_hf.state_dict())
    prompt = Tokenizer().encode("def fibonacci(n):\n    return")
    assert_same_model(shipped_model, shipped_hf, torch.tensor([prompt]), n_new=24)


@pytest.mark.parametrize("shard", [None, "1MB"], ids=["one file", "shards"])
def test_save_pretrained_then_from_hf_gives_the_same_weights(
    shipped_model, shipped_hf, tmp_path, shard
):
    shipped_hf.save_pretrained(tmp_path, **({"max_shard_size": shard} if shard else {}))
    assert (tmp_path / "model.safetensors.index.json").is_file() == (shard is not None)
    back = from_hf(tmp_path)
    assert back.cfg == shipped_model.cfg and not back.training
    ours = shipped_model.state_dict()
    assert all(torch.equal(v, ours[k]) for k, v in back.state_dict().items())


# --- random HF Llamas → the course's model ----------------------------------------------------

SHAPES = {  # name → LlamaConfig arguments over SMALL
    "gqa, untied": {"num_key_value_heads": 2},
    "mha, tied": {"num_key_value_heads": 4, "tie_word_embeddings": True},
    "gqa, tied, rope_theta 5e5": {
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
    "one kv head, rope_theta 1e6": {
        "num_key_value_heads": 1,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
    },
}
SMALL = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=128,
    rms_norm_eps=NORM_EPS,
)


def random_llama(seed: int = 0, **overrides):
    """A small LlamaForCausalLM with weights large enough for logits a few units apart (HF's
    init, std 0.02, gives near-ties), and norm gains other than one."""
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**(SMALL | overrides))).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return hf


@pytest.mark.parametrize("shape", SHAPES)
def test_a_random_hf_llama_converts_exactly(shape, tmp_path):
    hf = random_llama(**SHAPES[shape])
    idx = torch.randint(0, SMALL["vocab_size"], (2, 40))
    model = from_hf(hf)
    assert model.cfg.n_kv_heads == hf.config.num_key_value_heads
    assert model.cfg.rope_theta == hf.config.rope_parameters["rope_theta"]
    assert_same_model(model, hf, idx)
    hf.save_pretrained(tmp_path)  # a tied model's file has no lm_head.weight
    from_folder = from_hf(tmp_path)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in from_folder.state_dict().items())
    assert torch.equal(to_hf(model).state_dict()["lm_head.weight"], hf.lm_head.weight)


def test_a_config_as_transformers_4_wrote_it_converts(tmp_path):
    """Before transformers 5, rope_theta sat at the top of config.json, beside rope_scaling."""
    hf = random_llama(rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["rope_parameters"]
    (tmp_path / "config.json").write_text(
        json.dumps(config | {"rope_theta": 500000, "rope_scaling": None})
    )
    model = from_hf(tmp_path)
    assert model.cfg.rope_theta == 500000.0
    assert_same_model(model, hf, torch.randint(0, SMALL["vocab_size"], (1, 16)), n_new=4)


def test_limits_are_the_callers(tmp_path):
    hf = random_llama(max_position_embeddings=16384)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        from_hf(hf)
    model = from_hf(hf, limits=Limits(seq_len=16384))
    assert model.cfg.max_seq_len == 16384


# --- what the course model cannot express: one row per config field --------------------------

CONFIG = {  # a config.json the course model can take, as transformers 5 writes one
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 96,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "hidden_act": "silu",
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    "tie_word_embeddings": False,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "mlp_bias": False,
    "pretraining_tp": 1,
}
ABSENT = object()  # the field left out of config.json

REFUSED_CONFIGS = [  # (field, its value, what the ValueError names)
    ("model_type", "mistral", "model_type"),
    ("model_type", ABSENT, "model_type"),
    ("architectures", ["MistralForCausalLM"], "architectures"),
    ("hidden_act", "gelu", "hidden_act"),
    ("attention_bias", True, "attention_bias"),
    ("mlp_bias", True, "mlp_bias"),
    ("attention_dropout", 0.1, "attention_dropout"),
    ("pretraining_tp", 2, "pretraining_tp"),
    ("rope_scaling", {"rope_type": "llama3", "factor": 8.0}, "rope_scaling"),
    ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4}, "rope_type"),
    ("rope_parameters", {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}, "factor"),
    ("rope_parameters", {"rope_theta": 1e4, "partial_rotary_factor": 0.5}, "partial_rotary"),
    ("rope_parameters", {"full_attention": {"rope_type": "default"}}, "rope_parameters"),
    ("rope_parameters", [10000.0], "rope_parameters"),
    ("rope_parameters", {"rope_theta": 1.0}, "rope_theta"),
    ("sliding_window", 4096, "sliding_window"),
    ("use_sliding_window", True, "use_sliding_window"),
    ("head_dim", 16, "head_dim"),
    ("rms_norm_eps", 1e-6, "rms_norm_eps"),
    ("rms_norm_eps", ABSENT, "rms_norm_eps"),  # HF's default, 1e-6
    ("quantization_config", {"quant_method": "bitsandbytes"}, "quantization_config"),
    ("tie_word_embeddings", "yes", "tie_word_embeddings"),
    ("hidden_size", "32", "hidden_size"),
    ("num_attention_heads", ABSENT, "num_attention_heads"),
    ("num_key_value_heads", 3, "num_key_value_heads"),
    ("num_hidden_layers", 100, "num_hidden_layers"),
    ("max_position_embeddings", 10**6, "max_position_embeddings"),
    ("vocab_size", 10**7, "parameters"),
]


def folder_with(path, config: dict, **files) -> str:
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    for name, data in files.items():
        (path / name.replace("__", ".")).write_bytes(data)
    return path


@pytest.mark.parametrize(
    "field, value, named", REFUSED_CONFIGS, ids=[f"{f}={v!r:.20}" for f, v, _ in REFUSED_CONFIGS]
)
def test_a_config_the_course_model_cannot_express_is_refused(field, value, named, tmp_path):
    config = {k: v for k, v in CONFIG.items() if k != field}
    if value is not ABSENT:
        config[field] = value
    with pytest.raises(ValueError, match=named):
        from_hf(folder_with(tmp_path, config))


def test_the_base_config_passes_to_the_weights(tmp_path):
    with pytest.raises(ValueError, match="no model.safetensors"):
        from_hf(folder_with(tmp_path, CONFIG))


# --- bad weights folders: one row per fault ---------------------------------------------------


def damaged(tensors: dict, fault: str) -> dict:
    t = dict(tensors)
    if fault == "missing":
        del t["model.norm.weight"]
    elif fault == "no head":
        del t["lm_head.weight"]
    elif fault == "extra":
        t["model.layers.9.mlp.up_proj.weight"] = torch.zeros(64, 32)
    elif fault == "shape":
        t["model.norm.weight"] = torch.ones(31)
    elif fault == "dtype":
        t["model.norm.weight"] = torch.ones(32, dtype=torch.int32)
    elif fault == "nan":
        t["model.norm.weight"] = torch.full((32,), float("nan"))
    return t


BAD_WEIGHTS = {  # fault → what the ValueError says
    "missing": r"missing tensors \['model.norm.weight'\]",
    "no head": r"missing tensors \['lm_head.weight'\]",
    "extra": r"unexpected \['model.layers.9",
    "shape": "model.norm.weight has shape",
    "dtype": "model.norm.weight has dtype I32",
    "nan": "model.norm.weight holds 32 non-finite",
}


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("small")
    random_llama().save_pretrained(path)
    return path


@pytest.mark.parametrize("fault", BAD_WEIGHTS)
def test_bad_weights_are_refused_before_they_are_used(small_folder, fault, tmp_path):
    tensors = damaged(load_file(str(small_folder / "model.safetensors")), fault)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_bytes((small_folder / "config.json").read_bytes())
    with pytest.raises(ValueError, match=BAD_WEIGHTS[fault]):
        from_hf(tmp_path)


def test_an_index_that_points_outside_the_folder_is_refused(small_folder, tmp_path):
    index = {"weight_map": {"model.norm.weight": "../model.safetensors"}}
    folder = folder_with(tmp_path / "m", CONFIG)
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="not a file in the folder"):
        from_hf(folder)


def test_a_folder_with_only_a_pickle_is_refused_unread(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    monkeypatch.setattr(torch, "load", never)
    monkeypatch.setattr(pickle, "load", never)
    folder = folder_with(tmp_path, CONFIG, pytorch_model__bin=pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match=r"pytorch_model\.bin is a pickle, which tinyllm never"):
        from_hf(folder)


def test_nothing_is_downloaded(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("from_hf opened a connection")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(ValueError, match="reads local folders only and never downloads"):
        from_hf("meta-llama/Llama-3.2-1B")


# --- the doors' other bad calls ---------------------------------------------------------------

BAD_CALLS = [  # (door, arguments, what the ValueError says)
    (from_hf, (42,), "a local folder or a transformers.LlamaForCausalLM"),
    (from_hf, (None,), "a local folder or a transformers.LlamaForCausalLM"),
    (from_hf, (torch.nn.Linear(2, 2),), "a local folder or a transformers.LlamaForCausalLM"),
    (from_hf, ("no/such/folder",), "local folders only"),
    (from_hf, (".", "big"), "limits must be a tinyllm.validate.Limits"),
    (to_hf, ("model",), "model must be a tinyllm Transformer"),
    (to_hf, (torch.nn.Linear(2, 2),), "model must be a tinyllm Transformer"),
]


@pytest.mark.parametrize("door, args, says", BAD_CALLS)
def test_bad_calls_are_refused(door, args, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        door(*args)


def test_a_file_or_an_hf_model_of_another_kind_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="local folders only"):
        from_hf(tmp_path / "config.json")
    with pytest.raises(ValueError, match="model_type"):
        from_hf(folder_with(tmp_path / "list", CONFIG | {"model_type": None}))
    (tmp_path / "bad" / "config.json").parent.mkdir()
    (tmp_path / "bad" / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        from_hf(tmp_path / "bad")
    with pytest.raises(ValueError, match="a local folder or a transformers.LlamaForCausalLM"):
        from_hf(random_llama().model)  # the bare LlamaModel, without its LM head


# --- transformers stays optional ----------------------------------------------------------------


def test_without_transformers_to_hf_says_how_to_install_it(toy_model, small_folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers fails
    with pytest.raises(ImportError, match=re.escape('pip install -e ".[hf]"')):
        to_hf(toy_model)
    assert from_hf(small_folder).cfg.vocab_size == SMALL["vocab_size"]  # a folder needs none


def test_importing_the_lab_does_not_import_transformers():
    code = "import sys, tinyllm.lab, tinyllm.lab.hf; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hf_generate_as_a_peer_gives_the_course_models_greedy_tokens(shipped_model):
    """lab.peers.hf_generate_us, the peer's timing loop, runs HF's generate() with the static
    cache (uncompiled here: Inductor on a CPU compiles for minutes) and returns its ids."""
    from tinyllm.lab import engine_time, peers

    prompt = engine_time.workload(1)[0][0]
    got = peers.hf_generate_us(shipped_model, prompt, n_new=6, compile=False, warm=0, repeats=1)
    assert got["us_per_token"] > 0
    assert got["ids"] == generate(shipped_model, torch.tensor([prompt]), 6)[0].tolist()
