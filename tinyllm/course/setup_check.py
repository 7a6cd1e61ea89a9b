"""Is this machine ready for the course? One [OK]/[FAIL] line per thing a learner needs.

    from tinyllm.course.setup_check import check_environment, print_report
    print_report(check_environment())

or, from a terminal, `python -m tinyllm.course.setup_check`. Notebook 00 calls it first.

A machine without a GPU is ready: every lesson runs on the CPU, and the cells that measure
a GPU show a recorded measurement from results/ instead. Only something that stops a
lesson from running is a [FAIL].

Versions are printed after the name of what they version ("torch 2.13.0+cpu"), the form
notebooks/nbval_sanitize.cfg masks, so the committed outputs hold on any machine.

The checkers of notebook 00's exercises live here too: each prints [OK] or a hint (never
a traceback) and returns True or False.
"""

import importlib
import re
import sys

from tinyllm.checkpoint import MODEL_CARD, PRETRAINED, card_sha256, sha256
from tinyllm.config import get_config

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 5)  # pyproject.toml's lower bound
PACKAGES = ("ipywidgets", "matplotlib", "safetensors")  # what the lessons import besides torch
NO_GPU = "CPU only: every lesson runs; GPU measurements come from results/"


def major_minor(version: str) -> tuple[int, int]:
    """"2.13.0+cu130" → (2, 13); (0, 0) when the string does not start with one."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def check_python() -> tuple[str, bool, str]:
    v = sys.version_info
    need = ".".join(map(str, MIN_PYTHON))
    return "Python", v[:2] >= MIN_PYTHON, f"{v.major}.{v.minor}.{v.micro} ({need} or newer needed)"


def check_torch() -> tuple[str, bool, str]:
    need = ".".join(map(str, MIN_TORCH))
    try:
        import torch
    except ImportError as e:
        return "torch", False, f"not importable ({e}): run `make lab`, or `pip install -e .`"
    ok = major_minor(torch.__version__) >= MIN_TORCH
    return "torch", ok, f"{torch.__version__} ({need} or newer needed)"


def check_device() -> tuple[str, bool, str]:
    """A working GPU, or the CPU: both are [OK]. A GPU that torch sees but cannot run on is not."""
    try:
        import torch
    except ImportError:
        return "device", False, "unknown: torch is not importable"
    if not torch.cuda.is_available():
        return "device", True, NO_GPU
    name = torch.cuda.get_device_name(0)
    try:  # one tiny kernel: a wheel built without this GPU's architecture fails here
        torch.ones(1, device="cuda").add_(1).item()
    except Exception as e:  # noqa: BLE001 - any failure means the GPU is unusable
        return "device", False, f"CUDA GPU {name} found, but a kernel failed: {e}"
    return "device", True, f"CUDA GPU {name} (CUDA {torch.version.cuda})"


def check_package(name: str) -> tuple[str, bool, str]:
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        return name, False, f"not importable ({e}): run `make lab`, or `pip install -e .`"
    return name, True, str(getattr(module, "__version__", "(version unknown)"))


def check_weights(path=PRETRAINED, card=MODEL_CARD) -> tuple[str, bool, str]:
    """The shipped weights are there and are the file the model card describes."""
    if not path.is_file():
        return "weights", False, f"{path.name} is missing: reinstall the tinyllm package"
    try:
        expected = card_sha256(card)
    except (OSError, ValueError) as e:
        return "weights", False, f"cannot read the model card's sha256: {e}"
    actual = sha256(path)
    if actual != expected:
        return "weights", False, (f"{path.name} sha256 {actual[:12]}… differs from the model "
                                  f"card's {expected[:12]}…: the file is damaged or replaced")
    return "weights", True, f"{path.name} sha256 {actual[:12]}… matches {card.name}"


def check_environment() -> list[tuple[str, bool, str]]:
    """(name, ok, detail) for Python, torch, the device, each package, the shipped weights."""
    return [check_python(), check_torch(), check_device(),
            *(check_package(name) for name in PACKAGES), check_weights()]


def print_report(items) -> None:
    """One line per item, [OK] or [FAIL], then a one-line verdict."""
    for name, ok, detail in items:
        print(f"{'[OK]' if ok else '[FAIL]':<7}{name:<13}{detail}")
    failed = sum(not ok for _, ok, _ in items)
    if failed:
        print(f"\n{failed} of {len(items)} checks failed: fix the [FAIL] lines above, "
              "then run this again.")
    else:
        print(f"\nAll {len(items)} checks passed: the environment is ready.")


# --- notebook 00's exercise checkers ---------------------------------------------------------

def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_token_count(answer, text: str) -> bool:
    """Exercise: how many ids does Tokenizer().encode(text) return? One per UTF-8 byte."""
    if answer is None:
        print("[hint] Not answered yet: set `answer` to the number of tokens you predict.")
        return False
    if not _is_int(answer):
        print(f"[hint] The answer is a whole number of tokens, got {answer!r}.")
        return False
    n_bytes, n_chars = len(text.encode("utf-8")), len(text)
    if answer == n_bytes:
        print(f"[OK] {n_bytes} tokens for {n_chars} characters: one token per UTF-8 byte.")
        return True
    if answer == n_chars:
        print(f"[hint] {answer} is the number of characters. The tokenizer counts bytes: "
              "how many bytes does UTF-8 use for each character that is not ASCII?")
    else:
        print(f"[hint] Not {answer}. UTF-8 writes an ASCII character in 1 byte, an accented "
              "Latin letter in 2, most other symbols (such as €) in 3, and an emoji in 4.")
    return False


def param_split(config: str = "tiny") -> tuple[int, int]:
    """(attention, feed-forward) parameter counts of one block of a preset."""
    from tinyllm.model import Block

    block = Block(get_config(config))
    return (sum(p.numel() for p in block.attn.parameters()),
            sum(p.numel() for p in block.ffn.parameters()))


def check_param_split(answer) -> bool:
    """Exercise: (attention, feed_forward) parameter counts of one block of the shipped model."""
    if answer is None:
        print("[hint] Not answered yet: set `answer = (attention, feed_forward)`, two ints.")
        return False
    if (not isinstance(answer, (tuple, list)) or len(answer) != 2
            or not all(_is_int(a) for a in answer)):
        print(f"[hint] The answer is a pair of ints (attention, feed_forward), got {answer!r}.")
        return False
    cfg = get_config("tiny")
    attn, ffn = param_split("tiny")
    a, f = answer
    if (a, f) == (attn, ffn):
        print(f"[OK] attention {attn:,}, feed-forward {ffn:,}: the feed-forward holds "
              f"{ffn / attn:.0f}× the attention's parameters.")
        return True
    if (a, f) == (ffn, attn):
        print("[hint] Right numbers, swapped: the answer is (attention, feed_forward).")
        return False
    norm = cfg.d_model  # one RMSNorm's weight
    d = cfg.d_model
    hints = []
    if a == attn:
        hints.append("The attention count is right.")
    elif a in (attn + norm, attn + 2 * norm):
        hints.append("Attention: count only block.attn; the RMSNorms sit outside it.")
    elif a == 4 * d * d:
        hints.append("Attention: wk and wv are smaller than wq. Grouped-query attention gives "
                     "keys and values n_kv_heads heads, not n_heads.")
    else:
        hints.append("Attention: add up in_features × out_features of wq, wk, wv and wo "
                     "(no biases).")
    if f == ffn:
        hints.append("The feed-forward count is right.")
    elif f in (ffn + norm, ffn + 2 * norm):
        hints.append("Feed-forward: count only block.ffn; the RMSNorms sit outside it.")
    elif f == 2 * d * cfg.ffn_hidden:
        hints.append("Feed-forward: SwiGLU has three matrices, w1 and w3 (d_model → "
                     "ffn_hidden) and w2 (back).")
    else:
        hints.append("Feed-forward: add up in_features × out_features of w1, w2 and w3.")
    print("[hint] " + " ".join(hints))
    return False


if __name__ == "__main__":
    items = check_environment()
    print_report(items)
    sys.exit(0 if all(ok for _, ok, _ in items) else 1)
