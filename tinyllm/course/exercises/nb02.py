"""Checkers of notebook 02 · static shapes."""

import torch
from torch.overrides import TorchFunctionMode

from tinyllm.course.exercises.harness import FAILED, call, check_cases, hint, ok, same_mask
from tinyllm.kv_cache import window_mask


def check_window_mask(fn) -> bool:
    """fn(pos, window, first_valid (B,)) → bool (B, window), StaticKVCache's decode mask."""
    g = torch.Generator().manual_seed(0)
    cases = [(0, 1, [0]), (5, 8, [0, 3, 5]), (7, 8, [0, 0]), (3, 16, [0, 1, 2, 3])]
    for _ in range(3):
        pos = int(torch.randint(1, 30, (), generator=g))
        window = pos + 1 + int(torch.randint(0, 10, (), generator=g))
        cases.append((pos, window, torch.randint(0, pos + 1, (4,), generator=g).tolist()))
    return check_cases(
        fn,
        [((p, w, torch.tensor(f)), f"pos={p}, window={w}, first_valid={f}") for p, w, f in cases],
        window_mask,
        "your mask is StaticKVCache's",
        same_mask,
    )


class _HostReads(TorchFunctionMode):
    """Notes every time `watched` is read on the host (.item(), int(), indexing a list)."""

    def __init__(self, watched):
        super().__init__()
        self.watched, self.reads = watched, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if (
            args
            and args[0] is self.watched
            and getattr(func, "__name__", "")
            in ("item", "tolist", "__int__", "__index__", "__float__", "__bool__")
        ):
            self.reads.append(func.__name__)
        return func(*args, **(kwargs or {}))


def check_static_write(fn) -> bool:
    """fn(cache_k (B,H,L,D), k_new (B,H,1,D), pos (1,)) writes k_new at pos, in place,
    without reading pos on the host."""
    g = torch.Generator().manual_seed(0)
    for p in (0, 11, 5):
        cache_k, k_new = torch.randn(2, 2, 12, 4, generator=g), torch.randn(2, 2, 1, 4, generator=g)
        before, want = cache_k.clone(), cache_k.clone()
        want[:, :, p] = k_new[:, :, 0]
        pos, shown = torch.tensor([p]), f"a (2, 2, 12, 4) cache at pos={p}"
        with _HostReads(pos) as spy:
            if call(fn, (cache_k, k_new, pos), shown, none_ok=True) is FAILED:
                return False
        if spy.reads:
            return hint(
                f"on {shown} your function reads pos on the host ({spy.reads[0]}): a "
                f"graph would replay the position it saw at capture. Pass the tensor, "
                f"as index_copy_ does"
            )
        if torch.equal(cache_k, before):
            return hint(
                f"on {shown} cache_k is unchanged: write into it in place (index_copy_, "
                f"with its underscore), a graph reads fixed addresses"
            )
        if not torch.equal(cache_k, want):
            return hint(
                f"on {shown} cache_k holds wrong values: k_new belongs at position "
                f"pos, and nothing else may change"
            )
    return ok("k_new lands at pos, in place, with pos never read on the host")
