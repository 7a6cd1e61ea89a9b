"""The sampler kernel as it was at 4218a1b: every stage for every row (call B's baseline)."""
import triton
import triton.language as tl


def sample_kernel_body(LOGITS, TEMPERATURE, TOP_K, SEED, POSITION, IDS, logits_row, t_row,
                       k_row, seed_row, position_row, vocab, V_PAD: tl.constexpr,
                       PDL: tl.constexpr = False):  # fmt: skip
    """Program b: row b's next id, as generation.reference_sample draws it. Its vocab logits
    sit in one tile of V_PAD, the ids past vocab at -inf: the argmax (greedy), the top-k threshold
    (the k-th of the logits sorted), the noise (splitmix64 of seed, position and id, three
    rounds), Gumbel-max over the ids kept. Division and log as torch's: rounded to nearest.
    PDL: as combine_kernel."""
    b = tl.program_id(0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    v = tl.arange(0, V_PAD)
    logits = tl.load(LOGITS + b * logits_row + v, mask=v < vocab, other=float("-inf"))
    logits = logits.to(tl.float32)
    greedy = tl.argmax(logits, axis=0, tie_break_left=True)
    temperature = tl.load(TEMPERATURE + b * t_row)
    t = tl.where(temperature > 0, temperature, 1.0).to(tl.float32)
    k = tl.load(TOP_K + b * k_row)
    k = tl.where((k > 0) & (k < vocab), k, vocab)
    kth = tl.max(tl.where(v == k - 1, tl.sort(logits, descending=True), float("-inf")), axis=0)
    # the noise: z = splitmix64(splitmix64(splitmix64(seed) ^ position) ^ id), in uint64
    z = tl.load(SEED + b * seed_row).to(tl.uint64, bitcast=True) + tl.zeros([V_PAD], tl.uint64)
    for r in tl.static_range(3):
        z = z + 0x9E3779B97F4A7C15
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB
        z = z ^ (z >> 31)
        if r == 0:
            z = z ^ tl.load(POSITION + b * position_row).to(tl.int64).to(tl.uint64, bitcast=True)
        if r == 1:
            z = z ^ v.to(tl.uint64)
    u = ((z >> 41).to(tl.float32) + 0.5) * 1.1920928955078125e-07  # 2**-23
    gumbel = -tl.log(-tl.log(u))
    scores = tl.where(logits < kth, float("-inf"), tl.math.div_rn(logits, t) + gumbel)
    drawn = tl.argmax(scores, axis=0, tie_break_left=True)
    tl.store(IDS + b, tl.where(temperature > 0, drawn, greedy).to(tl.int64))


sample_kernel = triton.jit(sample_kernel_body)


