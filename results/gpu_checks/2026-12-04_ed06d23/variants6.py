"""Issue 27, stop 47, call D: the package's fused and combine kernels with PDL's trigger moved
before their wait (gdc_launch_dependents, then gdc_wait): the next kernel may launch as soon as
this one starts, and still waits for it to finish before it reads. Built from the package's own
source by swapping the two lines, so every other line is the package's."""
import importlib.util
import inspect
import pathlib
import tempfile
import torch
import triton
import triton.language as tl  # noqa: F401  (the kernels' globals)
from tinyllm import kernels as K

SWAP = ("        tl.extra.cuda.gdc_wait()\n        tl.extra.cuda.gdc_launch_dependents()\n",
        "        tl.extra.cuda.gdc_launch_dependents()\n        tl.extra.cuda.gdc_wait()\n")


def swapped(*functions):
    """The functions' source with the two lines swapped, written to a module and imported:
    Triton reads a kernel's source from its file."""
    src = "import triton\nimport triton.language as tl\n\n\n"
    for f in functions:
        body = inspect.getsource(f)
        assert body.count(SWAP[0]) == 1, f.__name__
        src += body.replace(SWAP[0], SWAP[1]) + "\n\n"
    path = pathlib.Path(tempfile.mkdtemp()) / "early_kernels.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("early_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [triton.jit(getattr(module, f.__name__)) for f in functions]


fused_early, combine_early = swapped(K.fused_kernel_body, K.combine_kernel_body)


def op(*args, fused=True, combine=True, shares=False):
    kernels = (fused_early if fused else K.fused_kernel, combine_early if combine else K.combine_kernel)
    return K.triton_rope_write_attend(*args, kernels=kernels, shares=shares)
