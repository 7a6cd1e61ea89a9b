"""The package's kernels at 0abd23e (main before stop 50's kernel), loaded as a module of their
own: its custom ops are plain functions here, so nothing is registered twice."""
import importlib.util
import torch


def load_before(path=".final/kernels_0abd23e.py"):
    class Op:
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *a, **k):
            return self.fn(*a, **k)

        def register_kernel(self, *a, **k):
            return lambda f: f

        def register_fake(self, f):
            return f

    real = torch.library.custom_op
    torch.library.custom_op = lambda *a, **k: (lambda fn: Op(fn))
    try:
        spec = importlib.util.spec_from_file_location("kernels_before", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        torch.library.custom_op = real
    return mod
