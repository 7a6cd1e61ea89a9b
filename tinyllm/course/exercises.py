"""Checkers for the notebooks' exercises.

Each checker compares the learner's answer with what the package really does, on edge
cases and random ones. It prints "[OK] ..." and returns True, or prints one "[HINT] ..."
naming the input it failed on and returns False: a stub that still raises
NotImplementedError, a crash or a wrong value all give a hint, never a traceback. The
GPU-only bonus returns None without CUDA.
"""

import contextlib
import math
import signal
import threading

import torch
from torch.overrides import TorchFunctionMode

from tinyllm.course.viz import sig3
from tinyllm.graphs import bucket_for, default_buckets, wasted_share
from tinyllm.kv_cache import slot_mask, window_mask
from tinyllm.lab.results import load_results

_FAILED = object()


class _TooSlow(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float, hint: str):
    """Interrupt a learner's function that runs past `seconds` (main thread, Unix only;
    elsewhere no limit) and turn it into a hint."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _TooSlow(hint)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _ok(message: str) -> bool:
    print(f"[OK] {message}")
    return True


def _hint(message: str) -> bool:
    print(f"[HINT] {message}")
    return False


def _call(fn, args: tuple, shown: str, none_ok: bool = False):
    """fn(*args), or _FAILED after printing a hint."""
    if not callable(fn):
        _hint(f"pass your function itself (check(my_fn)), not {type(fn).__name__}")
        return _FAILED
    try:
        out = fn(*args)
    except NotImplementedError:
        _hint("not solved yet: replace `raise NotImplementedError` with your code")
        return _FAILED
    except _TooSlow as e:
        _hint(f"on {shown}: {e}")
        return _FAILED
    except Exception as e:  # a hint, not a traceback
        _hint(f"on {shown} your function raised {type(e).__name__}: {e}")
        return _FAILED
    if out is None and not none_ok:
        _hint(f"on {shown} your function returned None: did you forget `return`?")
        return _FAILED
    return out


def _equal(got, want) -> str | None:
    return None if got == want else f"returned {got!r}, expected {want!r}"


def _check_cases(fn, cases, reference, done: str, compare=_equal, none_ok=False) -> bool:
    """Run fn on each (args, shown) case against reference(*args); compare → problem or None."""
    for args, shown in cases:
        want = reference(*args)
        got = _call(fn, args, shown, none_ok)
        if got is _FAILED:
            return False
        problem = compare(got, want)
        if problem:
            return _hint(f"on {shown} your function {problem}")
    return _ok(done)


def _choices(answer) -> set[str]:
    """'a, c', 'ac', ['a', 'c'] or {'A', 'C'} → {'a', 'c'}."""
    text = "".join(map(str, answer)) if isinstance(answer, (list, tuple, set)) else str(answer or "")
    return {c for c in text.lower() if c.isalnum()}


# --- 01 launch-bound decode ---------------------------------------------------------------

def _close_in_us(got, want) -> str | None:
    if not isinstance(got, (int, float)) or math.isnan(got):
        return f"returned {got!r}, not a number of µs"
    if math.isclose(got, want, rel_tol=1e-3):
        return None
    off = math.log10(abs(got / want)) if got else 0
    units = (f" (off by 10^{round(off)}: GB/s is 1e9 bytes/s, and 1 s is 1e6 µs)"
             if got and abs(off - round(off)) < 0.01 and round(off) else "")
    return f"returned {got:.4g} µs, expected {want:.4g} µs{units}"


def check_bandwidth_floor(fn) -> bool:
    """fn(n_params, bytes_per_param, bandwidth_GBps) → µs to read every weight once."""
    cases = [((3_280_128, 2, 4000.0), "the tiny model in bf16 at 4000 GB/s"),
             ((7_000_000_000, 2, 3350.0), "a 7B model in bf16 at 3350 GB/s"),
             ((1_000_000, 4, 100.0), "1M fp32 weights at 100 GB/s")]
    return _check_cases(fn, [(a, f"{s} {a}") for a, s in cases],
                        lambda n, b, bw: n * b / (bw * 1e9) * 1e6,
                        "the floor is the weight bytes over the bandwidth", _close_in_us)


def check_kernels_per_step(answer, measured: int) -> bool:
    """answer: predicted kernels one decode step launches; right within ±25 % of measured."""
    if not isinstance(answer, (int, float)):
        return _hint(f"answer with a number of kernels, got {answer!r}")
    if abs(answer - measured) <= 0.25 * measured:
        return _ok(f"{answer} is close to the {measured} kernels measured")
    side = "low" if answer < measured else "high"
    return _hint(f"{answer} is too {side} ({measured} measured): count one layer's kernels in "
                 f"the table (norms, projections, RoPE, attention, SwiGLU, residual adds), "
                 f"multiply by n_layers, then add the embedding, final norm and LM head")


def check_launch_bound(answer, res: dict | None = None) -> bool | None:
    """answer: the recorded batch sizes at which eager decode is launch-bound, i.e. the CPU
    needs at least as long to issue a step as the GPU needs to run its kernels."""
    res = res or load_results()
    if res is None:
        print("No recorded results found in results/: run python -m tinyllm.lab.bench on a GPU.")
        return None
    cpu, gpu = res["cpu_time"], res["gpu_kernel_time"]
    times = {b: (c, gpu["eager_us"][gpu["batch"].index(b)])
             for b, c in zip(cpu["batch"], cpu["eager_us"]) if b in gpu["batch"]}
    want = {b for b, (c, g) in times.items() if c >= g}
    try:
        got = {int(b) for b in answer}
    except (TypeError, ValueError):
        return _hint(f"answer with the batch sizes, e.g. {{1, 2}}, got {answer!r}")
    if got - times.keys():
        return _hint(f"batch {min(got - times.keys())} was not recorded; recorded: {sorted(times)}")
    if got != want:
        b = min(got ^ want)
        c, g = times[b]
        return _hint(f"batch {b} {'is' if b in want else 'is not'} launch-bound: the CPU "
                     f"issues the step in {sig3(c)} µs, the GPU runs it in {sig3(g)} µs")
    return _ok(f"eager decode is launch-bound at batch {sorted(want)}")


# --- 02 static shapes ---------------------------------------------------------------------

def _bits(row) -> str:
    return "".join("1" if x else "0" for x in row.tolist())


def _same_mask(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        return f"returned {type(got).__name__} {getattr(got, 'dtype', '')}, expected a bool tensor"
    if got.shape != want.shape:
        return f"returned shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    if not torch.equal(got, want):
        r = int((got != want).any(dim=1).nonzero()[0])
        return f"returned row {r} = {_bits(got[r])}, expected {_bits(want[r])} (1 = may attend)"
    return None


def check_window_mask(fn) -> bool:
    """fn(pos, window, first_valid (B,)) → bool (B, window), StaticKVCache's decode mask."""
    g = torch.Generator().manual_seed(0)
    cases = [(0, 1, [0]), (5, 8, [0, 3, 5]), (7, 8, [0, 0]), (3, 16, [0, 1, 2, 3])]
    for _ in range(3):
        pos = int(torch.randint(1, 30, (), generator=g))
        window = pos + 1 + int(torch.randint(0, 10, (), generator=g))
        cases.append((pos, window, torch.randint(0, pos + 1, (4,), generator=g).tolist()))
    return _check_cases(fn, [((p, w, torch.tensor(f)), f"pos={p}, window={w}, first_valid={f}")
                             for p, w, f in cases],
                        window_mask, "your mask is StaticKVCache's", _same_mask)


class _HostReads(TorchFunctionMode):
    """Notes every time `watched` is read on the host (.item(), int(), indexing a list)."""

    def __init__(self, watched):
        super().__init__()
        self.watched, self.reads = watched, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if args and args[0] is self.watched and getattr(func, "__name__", "") in (
                "item", "tolist", "__int__", "__index__", "__float__", "__bool__"):
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
            if _call(fn, (cache_k, k_new, pos), shown, none_ok=True) is _FAILED:
                return False
        if spy.reads:
            return _hint(f"on {shown} your function reads pos on the host ({spy.reads[0]}): a "
                         f"graph would replay the position it saw at capture. Pass the tensor, "
                         f"as index_copy_ does")
        if torch.equal(cache_k, before):
            return _hint(f"on {shown} cache_k is unchanged: write into it in place (index_copy_, "
                         f"with its underscore), a graph reads fixed addresses")
        if not torch.equal(cache_k, want):
            return _hint(f"on {shown} cache_k holds wrong values: k_new belongs at position "
                         f"pos, and nothing else may change")
    return _ok("k_new lands at pos, in place, with pos never read on the host")


# --- 03 buckets ---------------------------------------------------------------------------

def check_bucket_for(fn) -> bool:
    """fn(n_keys, buckets) → the smallest bucket that holds n_keys."""
    cases = [(n, (128, 256, 512, 1024)) for n in (1, 127, 128, 129, 256, 257, 1023, 1024)]
    cases += [(n, (16, 24, 36, 54, 81, 100)) for n in (16, 17, 81, 82, 100)] + [(3, (3,))]
    return _check_cases(fn, [(c, f"n_keys={c[0]}, buckets={c[1]}") for c in cases], bucket_for,
                        "the smallest bucket that holds the keys, at every edge")


def check_default_buckets(fn) -> bool:
    """fn(max_len, first, growth) → graphs.default_buckets(max_len, first, growth). Each
    case gets 2 s: a bucket that stops growing (int(1 * 1.01) == 1) would loop forever."""
    cases = [(1024, 128, 2), (1000, 128, 2), (100, 128, 2), (128, 128, 2), (129, 128, 2),
             (1024, 128, 1.5), (1024, 16, 3), (10, 1, 1.01)]
    with _time_limit(2.0, "your loop did not end within 2 s: each bucket must be larger than "
                          "the one before (int(b * growth) can equal b; round up)"):
        return _check_cases(fn, [(c, f"max_len={c[0]}, first={c[1]}, growth={c[2]}") for c in cases],
                            default_buckets, "your buckets are graphs.default_buckets",
                            lambda got, want: _equal(tuple(got), want))


def check_wasted_share(value, buckets, max_len: int) -> bool:
    """value: share (0..1) of a max_len-token generation's attention work on masked keys."""
    want = wasted_share(buckets, max_len)
    if not isinstance(value, (int, float)):
        return _hint(f"answer with a number between 0 and 1, got {value!r}")
    if abs(value - want) <= 0.005:
        return _ok(f"{want:.1%} of the attention work with buckets {tuple(buckets)} is wasted")
    if abs(value - 100 * want) <= 0.5:
        return _hint("give a share between 0 and 1, not a percentage")
    if abs(value - (1 - want)) <= 0.005:
        return _hint("that is the useful share: the question asks for the work on masked keys")
    return _hint(f"{value:.3g} is off: sum (window - n) over every n = 1..{max_len}, "
                 f"divided by the sum of the windows")


# --- 04 capture and replay ----------------------------------------------------------------

STALE_READS = {
    "a": "`logits = dec.step(tok)`, read after the next step",
    "b": "`last = logits[:, -1]`, taken before the next step, read after it",
    "c": "`nxt = logits[:, -1].argmax(-1)`, taken before the next step, read after it",
    "d": "`saved = logits.clone()`, taken before the next step, read after it",
    "e": "`same = logits`, taken before the next step, read after it",
}
_STALE = {"a": "it is the graph's static output buffer, which every replay overwrites",
          "b": "indexing returns a view of the static buffer, not a copy",
          "c": "argmax runs eagerly and writes a new tensor, outside the graph's pool",
          "d": "clone() copies the values out of the static buffer",
          "e": "a second name for the same tensor, the static buffer"}


def check_stale_reads(answer) -> bool:
    """answer: the letters of STALE_READS that are stale, with GraphDecoder on a GPU."""
    want, got = {"a", "b", "e"}, _choices(answer)
    if got - STALE_READS.keys():
        unknown = min(got - STALE_READS.keys())
        return _hint(f"{unknown!r} is not one of the options {sorted(STALE_READS)}")
    if got != want:
        c = min(got ^ want)
        return _hint(f"({c}) is {'stale' if c in want else 'not stale'}: {_STALE[c]}")
    return _ok("a replay overwrites the static output: read or copy it before the next step")


POOL_CHOICES = {
    "a": "a private memory pool per bucket graph",
    "b": "one pool shared by all the bucket graphs, captured largest window first",
    "c": "one pool shared by all the bucket graphs, captured smallest window first",
}
_POOLS = {"a": "safe, but the memory is the sum of every graph's pool (see the measured bars)",
          "c": "each larger capture needs blocks the pool does not have yet, so it grows at "
               "every capture; largest first, the smaller graphs fit in what it already has"}


def check_pool_choice(answer) -> bool:
    """answer: the letter of POOL_CHOICES that GraphDecoder uses, and rightly so."""
    got = str(answer).strip().lower()
    if got == "b":
        return _ok("the bucket graphs never replay at the same time, so one pool serves them "
                   "all; captured largest first, the smaller ones reuse its memory")
    return _hint(f"({got}): {_POOLS.get(got, f'not one of the options {sorted(POOL_CHOICES)}')}")


def check_capture_replay(fn) -> bool | None:
    """GPU bonus. fn(f, example) → run(x): captures f on a static copy of example once;
    run(x) copies x in, replays the graph and returns its output."""
    if not torch.cuda.is_available():
        print("This bonus exercise needs CUDA: skipped on this machine.")
        return None
    calls = []

    def reference(x):
        return torch.sin(2 * x) + x.square().sum()

    def f(x):
        calls.append(1)
        return reference(x)

    g = torch.Generator(device="cuda").manual_seed(0)
    run = _call(fn, (f, torch.randn(256, device="cuda", generator=g)), "a (256,) CUDA tensor")
    if run is _FAILED:
        return False
    n_calls = len(calls)
    for i in range(3):
        x = torch.randn(256, device="cuda", generator=g)
        out = _call(run, (x,), f"replay {i}")
        if out is _FAILED:
            return False
        if not torch.equal(out, reference(x)):
            return _hint(f"replay {i} differs from f(x): copy x into the static input "
                         f"(static_x.copy_(x)) before graph.replay()")
    if len(calls) != n_calls:
        return _hint("run(x) calls f again: it should only copy x in and replay the graph")
    return _ok("three replays match f bit for bit, without calling f")


# --- 05 bit exactness ---------------------------------------------------------------------

def _first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)), None)


def check_first_difference(fn) -> bool:
    """fn(a_logits_list, b_logits_list) → first step index where not torch.equal, or None."""
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(2, 5, generator=g) for _ in range(4)]
    ulp = [x.clone() for x in a]
    ulp[3][1, 2] = torch.nextafter(a[3][1, 2], torch.tensor(math.inf))  # one ulp apart
    first = [x.clone() for x in a]
    first[0] += 1
    cases = [((a, [x.clone() for x in a]), "identical lists"),
             ((a, first), "lists that differ from step 0"),
             ((a, ulp), "lists one float ulp apart at step 3 only")]
    return _check_cases(fn, cases, _first_difference, "bit for bit: even one ulp counts",
                        none_ok=True)


def _rounded(t) -> list[float]:
    return [round(x, 4) for x in t.tolist()]


def _same_values(got, want) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        shown = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f"returned {shown}, expected a tensor of shape {tuple(want.shape)}"
    if torch.allclose(got.float(), want, atol=1e-6):
        return None
    return f"returned {_rounded(got)}, expected {_rounded(want)}"


def _margin(logits):
    top2 = logits.topk(2).values
    return top2[:, 0] - top2[:, 1]


def check_flip_margin(fn) -> bool:
    """fn(logits (B, V)) → top-1 minus top-2 logit per row, shape (B,)."""
    g = torch.Generator().manual_seed(0)
    cases = [((torch.randn(3, 10, generator=g),), "random (3, 10) logits"),
             ((torch.tensor([[1.0, 1.0, 0.0]]),), "a tie [[1, 1, 0]]"),
             ((torch.tensor([[-3.0, -1.0], [2.0, -2.0]]),), "V = 2 [[-3, -1], [2, -2]]")]
    return _check_cases(fn, cases, _margin, "margins match: a tie has margin 0", _same_values)


# --- 06 continuous batching -----------------------------------------------------------------

def check_admission(fn) -> bool:
    """fn(free_slots, queue) → [(slot, request)]: lowest free slot first, queue in order."""
    cases = [([0, 1, 2], [7, 8]), ([3, 1], [5, 6, 9]), ([], [1]), ([0, 2], []), ([2], [4, 5])]
    return _check_cases(fn, [((list(f), list(q)), f"free_slots={f}, queue={q}") for f, q in cases],
                        lambda free, queue: list(zip(sorted(free), queue)),
                        "requests go to the lowest free slots, first come first served",
                        lambda got, want: _equal([tuple(p) for p in got], want))


def check_slot_mask(fn) -> bool:
    """fn(lens (n_slots,), window) → bool (n_slots, window), SlotKVCache's decode mask."""
    g = torch.Generator().manual_seed(0)
    cases = [([0, 3, 5], 8), ([7], 8), ([0, 0], 1),
             (torch.randint(0, 16, (4,), generator=g).tolist(), 16)]
    return _check_cases(fn, [((torch.tensor(l), w), f"lens={l}, window={w}") for l, w in cases],
                        slot_mask, "your mask is SlotKVCache's: a free slot attends to key 0",
                        _same_mask)


# --- 07: graphs and torch.compile ----------------------------------------------------------

def check_compile_count(fn) -> bool:
    """fn(start, steps, buckets) → how many graphs dynamo compiles (dynamic=False) for
    `steps` static decode steps from position `start` with these buckets."""
    from tinyllm.graphs import bucket_for

    cases = [(10, 100, (32, 64, 128, 256)), (0, 1, (128, 1024)), (127, 2, (128, 256)),
             (40, 300, (64, 128, 256, 512)), (500, 20, (1024,))]
    for start, steps, buckets in cases:
        want = len({bucket_for(n + 1, buckets) for n in range(start, start + steps)})
        got = _call(fn, (start, steps, buckets), f"start={start}, steps={steps}, buckets={buckets}")
        if got is _FAILED:
            return False
        if got != want:
            return _hint(f"start={start}, steps={steps}, buckets={buckets}: you said {got!r}. "
                         f"Dynamo compiles once per distinct window: which windows do the "
                         f"positions {start}..{start + steps - 1} use?")
    return _ok("one compiled graph per window the decode visits")


def check_silent_skip(answer, res: dict) -> bool:
    """answer: the name of the res["fusion"] row where reduce-overhead silently ran
    without a CUDA graph."""
    skipped = [r["name"] for r in res["fusion"]["rows"] if r.get("cudagraph_skips")]
    if answer is None:
        return _hint("not answered yet: set answer to one of the row names printed above")
    if answer in skipped:
        return _ok(f"{answer!r}: Inductor saw the cache tensors mutated in place and skipped "
                   f"its CUDA graph, with only a log line to say so")
    names = [r["name"] for r in res["fusion"]["rows"]]
    if answer not in names:
        return _hint(f"{answer!r} is not a row name; the rows are {names}")
    return _hint(f"{answer!r} did replay a graph (or never tried to): look for the row whose "
                 f"cudagraph_skips is above 0, and whose step is far slower than any graph's")


def check_fusion_share(fn, res: dict) -> bool:
    """fn(res) → the share of the unfused graph step's time that fusion removes: 1 − (fused
    kernels in bucketed graphs) / (graph, unfused kernels), from res["fusion"]."""
    rows = {r["name"]: r["step_us"] for r in res["fusion"]["rows"]}
    want = 1 - rows["fused kernels in bucketed graphs"] / rows["graph (unfused kernels, bucketed)"]
    got = _call(fn, (res,), "the recorded fusion rows")
    if got is _FAILED:
        return False
    if isinstance(got, (int, float)) and abs(got - (1 - want)) <= 0.01:
        return _hint(f"{got:.2f} is the ratio of the two step times; the share removed is "
                     f"1 minus that ratio")
    if not isinstance(got, (int, float)) or abs(got - want) > 0.01:
        return _hint(f"you said {got!r}; compare the step_us of the two graph rows, and "
                     f"give a share between 0 and 1")
    return _ok(f"fusion removes {want:.0%} of the graph step's time")
