"""Checkers of notebook 02 · static shapes."""

import collections
import dis
import sys
import types

import torch

from tinyllm.course.exercises.harness import (
    TooSlow,
    Verdict,
    check_cases,
    checker,
    exited,
    hint,
    off_device,
    ok,
    own_function,
    same_mask,
    shown_type,
    time_limit,
)
from tinyllm.kv_cache import window_mask
from tinyllm.lab import simgraph


def _loops(code: types.CodeType) -> bool:
    """Does this code object loop: a for (FOR_ITER, comprehensions too) or a jump back (while)?"""
    for ins in dis.get_instructions(code):
        if ins.opname == "FOR_ITER":
            return True
        jump = ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs
        if jump and isinstance(ins.argval, int) and ins.argval < ins.offset:
            return True
    return False


def python_loop(fn) -> str | None:
    """The name of the function that runs a Python loop when fn runs, or None: fn itself, the
    functions, lambdas and comprehensions defined in it, and the functions of fn's own
    module (a notebook's) that it calls by name or holds in a closure. Read from the
    bytecode, so it needs no source; the package and torch are not looked into."""
    module, todo, seen = getattr(fn, "__module__", None), [fn], set()
    while todo:
        f = todo.pop()
        f = getattr(f, "func", f)  # a functools.partial
        code = getattr(f, "__code__", None)
        if code is None:  # a callable object: its __call__
            f = type(f).__call__ if callable(f) else None
            code = getattr(f, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        helpers = dict(getattr(f, "__globals__", {}))
        for cell in getattr(f, "__closure__", None) or ():
            try:
                helpers[id(cell)] = cell.cell_contents
            except ValueError:  # an empty cell
                pass
        codes = [code]
        while codes:
            c = codes.pop()
            if _loops(c):
                return getattr(f, "__qualname__", c.co_name)
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
            names = set(c.co_names)
            todo += [
                h
                for key, h in helpers.items()
                if (key in names or isinstance(key, int))
                and isinstance(h, types.FunctionType)
                and h.__module__ == module
            ]
    return None


ITERATION_INPUTS = (  # (pos, window, first_valid): 2 rows of 8 keys, then 6 rows of 16
    (5, 8, (0, 3)),
    (5, 16, (0, 3, 1, 2, 5, 4)),
)


def python_calls(fn, args) -> collections.Counter | None:
    """How many times each function of fn's own module (a notebook's) ran while fn(*args)
    ran, by code object (fn itself, its helpers and lambdas, each call of a recursion);
    None if fn raised (check_cases then says what). Past 5 s, TooSlow."""
    module, counts = getattr(fn, "__module__", None), collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_globals.get("__name__") == module:
            counts[frame.f_code] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with time_limit(5.0, "your function did not finish within 5 s"):
            fn(*args)
    except Exception:
        return None
    finally:
        sys.setprofile(previous)
    return counts


def python_iteration(fn) -> str | None:
    """The hint if Python code of the learner's runs once per row or key: the calls of its
    functions grow with the input (map or filter with a lambda, functools.reduce, a
    recursion), which no loop in the bytecode shows. None otherwise."""
    counts, shown = [], []
    for pos, window, first_valid in ITERATION_INPUTS:
        shown.append(f"pos={pos}, window={window}, first_valid={list(first_valid)}")
        try:
            counts.append(python_calls(fn, (pos, window, torch.tensor(first_valid))))
        except TooSlow as e:
            return f"on {shown[-1]}: {e}"
        except SystemExit:  # exit() or sys.exit(): a hint, not the end of the notebook
            return exited(shown[-1])
    a, b = counts
    if a is None or b is None or a == b:
        return None
    code = max(a.keys() | b.keys(), key=lambda c: abs(b[c] - a[c]))
    (_, w, small), (_, w_large, large) = ITERATION_INPUTS
    return (
        f"{code.co_qualname} ran {a[code]} times on {len(small)} rows of {w} keys and "
        f"{b[code]} times on {len(large)} rows of {w_large} keys: Python iterating over the "
        f"rows or keys (map with a lambda, a recursion), a loop by another name. Build the "
        f"mask for every row and key at once, comparing torch.arange(window) with pos and "
        f"with first_valid[:, None] (broadcasting)"
    )


@checker
def check_window_mask(fn) -> Verdict:
    """fn(pos, window, first_valid (B,)) → bool (B, window), StaticKVCache's decode mask,
    built without Python iterating over rows or keys, as the exercise asks: no loop in the
    bytecode (python_loop), and no function of the learner's that runs more often for a
    larger input (python_iteration: map with a lambda, a recursion)."""
    where = python_loop(fn) if callable(fn) else None
    if where is not None:
        return hint(
            f"{where} runs a Python loop (a for or while loop, or a comprehension): build the "
            f"mask for every row and key at once, comparing torch.arange(window) with pos "
            f"and with first_valid[:, None] (broadcasting)"
        )
    iterates = python_iteration(fn) if callable(fn) else None
    if iterates is not None:
        return hint(iterates)
    own = own_function(fn, (5, 8, torch.tensor([0, 3, 5])), window_mask, "kv_cache.window_mask")
    if own is not None:
        return own
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
        seconds=5.0,
    )


# --- exercise 2: the graph-safe write ------------------------------------------------------

SHAPE = (2, 2, 12, 4)  # (B, H, L, D): a cache of 12 positions
CAPTURED_AT, REPLAYED_AT = (0, 5, 11), (7, 2, 3)  # capture at one position, replay at another

HOST_READS = (  # what simgraph names, and how a learner wrote it
    ("_local_scalar_dense", "int(pos), pos.item(), pos[0] as an index, or `if ... == pos`"),
    ("is_nonzero", "`if ... == pos`"),
    ("tolist", "pos.tolist()"),
    ("numpy", "pos.numpy()"),
    ("Tensor.cpu()", "pos.cpu(), a copy to the host"),
    ("a tensor", "printing or formatting pos"),
    ("torch.tensor", "torch.tensor(...) of host data"),
    ("as_tensor", "torch.as_tensor(...) of host data"),
    ("asarray", "torch.asarray(...) of host data"),
)


def _tensors(p: int, seed: int, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    cache_k = torch.randn(SHAPE, generator=g).to(device)
    k_new = torch.randn(SHAPE[0], SHAPE[1], 1, SHAPE[3], generator=g).to(device)
    return cache_k, k_new, torch.tensor([p], device=device)


def _written(cache_k, k_new, p: int):
    want = cache_k.clone()
    want[:, :, p] = k_new[:, :, 0]
    return want


def _host_read(error: BaseException) -> str | None:
    """How the learner read pos on the host, if simgraph's capture refused it."""
    text = str(error)
    if "not permitted when stream is capturing" not in text:
        return None
    return next((how for key, how in HOST_READS if key in text), "a host read")


def _explain(e: BaseException, shown: str) -> bool:
    """The hint for what fn raised (in capture, or run on the CPU); returns False."""
    if isinstance(e, TooSlow):
        return hint(f"on {shown}: {e}")
    how = _host_read(e)
    if how is not None:
        return hint(
            f"on {shown} your function reads pos on the host ({how}): a CUDA graph records "
            f"GPU work only, and would replay the position it saw at capture. Pass the "
            f"tensor pos itself to a tensor op, as index_copy_ does"
        )
    if isinstance(e, NotImplementedError):
        return hint("not solved yet: replace `raise NotImplementedError` with your code")
    return hint(f"on {shown} your function raised {type(e).__name__}: {e}")


def _run(fn, args, shown: str):
    """fn(*args): None if it returned, else False after a hint."""
    try:
        with time_limit(5.0, "your function did not finish within 5 s"):
            fn(*args)
    except SystemExit:  # exit() or sys.exit(): a hint, not the end of the notebook
        return hint(exited(shown))
    except (TooSlow, Exception) as e:
        return _explain(e, shown)
    return None


def _changed(after, before) -> list[int]:
    return [j for j in range(before.shape[2]) if not torch.equal(after[:, :, j], before[:, :, j])]


@checker
def check_static_write(fn) -> Verdict:
    """fn(cache_k (B,H,L,D), k_new (B,H,1,D), pos (1,)) writes k_new at pos, in place,
    without reading pos on the host. Checked four ways, at three positions: captured in a
    simulated CUDA graph (lab.simgraph), where a host read raises; run on real CPU tensors,
    for the values and the write in place; the captured graph replayed at another position,
    where it must write; run on the meta device, where a copy to the host fails."""
    if not callable(fn):
        return hint(f"pass your function itself (check(my_fn)), not {shown_type(fn)}")
    with simgraph.graph(simgraph.CUDAGraph()):  # the first capture sets up (seconds): not
        torch.zeros(1).add_(1)  # the learner's time
    for seed, (p, q) in enumerate(zip(CAPTURED_AT, REPLAYED_AT)):
        shown = f"a {SHAPE} cache at pos={p}"
        # 1. capture: a host read raises; the write is recorded, not done
        cap_k, cap_new, cap_pos = _tensors(p, seed)
        graph, problem = simgraph.CUDAGraph(), None
        try:
            with simgraph.graph(graph):
                problem = _run(fn, (cap_k, cap_new, cap_pos), f"{shown}, in capture")
        except RuntimeError as e:  # a refused host read, which the function caught itself
            problem = problem if problem is not None else _explain(e, shown)
        if problem is not None:
            return False
        # 2. eagerly, on the CPU: the values, written in place
        cache_k, k_new, pos = _tensors(p, seed)
        before = cache_k.clone()
        if _run(fn, (cache_k, k_new, pos), shown) is not None:
            return False
        if not torch.equal(pos, torch.tensor([p])):
            return hint(
                f"on {shown} your function changed pos to {pos.tolist()}: leave it as it is, "
                f"the cache's end_step advances it, once per step"
            )
        changed = _changed(cache_k, before)
        if not changed:
            return hint(
                f"on {shown} cache_k is unchanged: write into it in place (index_copy_, "
                f"with its underscore, or an assignment into cache_k), a graph reads fixed "
                f"addresses"
            )
        if changed == [p]:
            if not torch.equal(cache_k, _written(before, k_new, p)):
                return hint(
                    f"on {shown} position {p} holds wrong values: it must hold k_new[:, :, 0]"
                )
        else:
            return hint(
                f"on {shown} your function changed position(s) {changed}: k_new belongs at "
                f"position {p} alone, and nothing else may change"
            )
        # 3. the graph captured at p, replayed with pos = q: it must write at q
        before = cap_k.clone()
        cap_pos.fill_(q)
        cap_new.copy_(torch.randn(cap_new.shape, generator=torch.Generator().manual_seed(99)))
        graph.replay()
        if not torch.equal(cap_k, _written(before, cap_new, q)):
            return hint(
                f"a graph of your function captured at pos={p} and replayed with pos={q} "
                f"wrote at {_changed(cap_k, before)}, not at [{q}]: the position must reach "
                f"the kernels as the tensor pos, read when the graph runs"
            )
        # 4. on the meta device, as a GPU's tensors are to the host (harness.off_device)
        away = off_device(fn, _tensors(p, seed), "cache_k.device")
        if away:
            return hint(f"on {shown}, with every tensor on the device, your function {away}")
    return ok("k_new lands at pos, in place, and a graph of your write follows pos at replay")
