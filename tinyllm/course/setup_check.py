"""Is this machine ready for the course? One [OK]/[FAIL] line per thing a learner needs.

    from tinyllm.course.setup_check import environment_report, print_report
    print_report(environment_report())

or, from a terminal, `python -m tinyllm.course.setup_check`. Notebook 00 calls it first.

A machine without a GPU is ready: every lesson runs on the CPU, and the cells that measure
a GPU show a recorded measurement from results/ instead. Only something that stops a
lesson from running is a [FAIL].

Versions are printed after the name of what they version ("torch 2.13.0+cpu"), the form
notebooks/nbval_sanitize.cfg masks, so the committed outputs hold on any machine.
"""

import importlib
import re
import sys

from tinyllm.checkpoint import MODEL_CARD, PRETRAINED, card_sha256, sha256

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 5)  # pyproject.toml's lower bound
PACKAGES = ("ipywidgets", "matplotlib", "safetensors")  # what the lessons import besides torch
NO_GPU = "CPU only: every lesson runs; GPU measurements come from results/"


def major_minor(version: str) -> tuple[int, int]:
    """ "2.13.0+cu130" → (2, 13); (0, 0) when the string does not start with one."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def python_item() -> tuple[str, bool, str]:
    v = sys.version_info
    need = ".".join(map(str, MIN_PYTHON))
    return "Python", v[:2] >= MIN_PYTHON, f"{v.major}.{v.minor}.{v.micro} ({need} or newer needed)"


def torch_item() -> tuple[str, bool, str]:
    need = ".".join(map(str, MIN_TORCH))
    try:
        import torch
    except ImportError as e:
        return "torch", False, f"not importable ({e}): run `make lab`, or `pip install -e .`"
    ok = major_minor(torch.__version__) >= MIN_TORCH
    return "torch", ok, f"{torch.__version__} ({need} or newer needed)"


def device_item() -> tuple[str, bool, str]:
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


def package_item(name: str) -> tuple[str, bool, str]:
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        return name, False, f"not importable ({e}): run `make lab`, or `pip install -e .`"
    return name, True, str(getattr(module, "__version__", "(version unknown)"))


def weights_item(path=PRETRAINED, card=MODEL_CARD) -> tuple[str, bool, str]:
    """The shipped weights are there and are the file the model card describes."""
    if not path.is_file():
        return "weights", False, f"{path.name} is missing: reinstall the tinyllm package"
    try:
        expected = card_sha256(card)
    except (OSError, ValueError) as e:
        return "weights", False, f"cannot read the model card's sha256: {e}"
    actual = sha256(path)
    if actual != expected:
        return (
            "weights",
            False,
            (
                f"{path.name} sha256 {actual[:12]}… differs from the model "
                f"card's {expected[:12]}…: the file is damaged or replaced"
            ),
        )
    return "weights", True, f"{path.name} sha256 {actual[:12]}… matches {card.name}"


def environment_report() -> list[tuple[str, bool, str]]:
    """(name, ok, detail) for Python, torch, the device, each package, the shipped weights."""
    return [
        python_item(),
        torch_item(),
        device_item(),
        *(package_item(name) for name in PACKAGES),
        weights_item(),
    ]


def print_report(items) -> None:
    """One line per item, [OK] or [FAIL], then a one-line verdict."""
    for name, ok, detail in items:
        print(f"{'[OK]' if ok else '[FAIL]':<7}{name:<13}{detail}")
    failed = sum(not ok for _, ok, _ in items)
    if failed:
        print(
            f"\n{failed} of {len(items)} checks failed: fix the [FAIL] lines above, "
            "then run this again."
        )
    else:
        print(f"\nAll {len(items)} checks passed: the environment is ready.")


if __name__ == "__main__":
    items = environment_report()
    print_report(items)
    sys.exit(0 if all(ok for _, ok, _ in items) else 1)
