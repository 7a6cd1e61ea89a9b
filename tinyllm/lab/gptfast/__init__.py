"""gpt-fast's decode recipe on the course's weights: the tool a learner would reach for, run the
way its own generate.py runs it, so that bench.py can time it beside the course's fastest step.

After gpt-fast (github.com/pytorch-labs/gpt-fast, now meta-pytorch/gpt-fast; BSD-3-Clause
licence, Copyright Meta Platforms, Inc.): model.py at commit 24428d7 and generate.py at commit
20c6671, the versions that attend with F.scaled_dot_product_attention. The design is theirs;
the code here is written anew in this project's words. Reproduced:

- model.py: a Transformer with a fused wqkv, wo, SwiGLU w1/w3/w2 and its own RMSNorm (fp32,
  then type_as); a KVCache module whose k_cache/v_cache buffers (B, n_kv_heads, max_seq_length,
  head_dim) are written by index at input_pos; setup_caches (length rounded up to a multiple
  of 8, freqs_cis for block_size positions in the weights' dtype, a boolean tril causal_mask);
  forward(idx, input_pos) gathers causal_mask[None, None, input_pos] and freqs_cis[input_pos];
  RoPE on interleaved pairs; GQA by repeat_interleave; SDPA with attn_mask.
- generate.py: sample (logits_to_probs with temperature and top_k, then
  multinomial_sample_one_no_sync), prefill, decode_one_token, decode_n_tokens (the SDPA
  backends it allows around each step, input_pos += 1 on the device, clones of what it keeps),
  its Inductor settings, the one line torch.compile(decode_one_token, mode="reduce-overhead",
  fullgraph=True), the cache sized min(prompt_len + max_new_tokens, block_size), and the
  defaults of its main(): temperature 0.8, top_k 200.

Changed on purpose: the course rotates pairs (x_j, x_{j+D/2}), gpt-fast pairs (x_2j, x_2j+1)
at the same frequencies, so from_course reorders the query and key rows inside each head (q·k,
hence the logits, are unchanged) and gpt-fast's RoPE code stays as it is. Inductor settings
hold only while a step compiles (a context manager restores them); the compiled function is
passed in, never swapped into a module global; errors are ValueErrors, and a step past the
cache raises where generate.py would index out of bounds. The decode loop copies each new
token once and feeds that copy back, where generate.py copies it twice (one copy kernel less
per step, in gpt-fast's favour). Speculative decoding, quantisation and tensor parallelism
are left out: they are not part of the step compared.

Not guaranteed: bit-equality with the course: the attention kernels differ, and gpt-fast
computes RoPE and its norms in fp32 between bf16 tensors; in fp32 on the CPU the logits
agree to ~1e-5 (tests/test_gptfast.py). Also offered, and named so: static_tables, the
one-line change that keeps torch 2.11's CUDAGraph Trees from copying freqs_cis and
causal_mask (plain attributes in model.py) at every replay; extra Inductor settings; and
make_ideal_step, its compiled forward replayed from a graph captured by hand (an ideal host:
no guards, no input copies), the footing on which its kernels meet the course's.
gpt-fast's newest generate.py (meta-pytorch 05f7c16) attends with FlexAttention block
masks instead; that variant is not reproduced here.
"""

from tinyllm.lab.gptfast.generate import (
    GENERATE_PY_INDUCTOR,
    GENERATE_PY_SDPA,
    TEMPERATURE,
    TOP_K,
    WARMUP_CALLS,
    compile_decode,
    decode_n_tokens,
    decode_next,
    decode_one_token,
    inductor_settings,
    logits_to_probs,
    make_decode_step,
    make_forward_step,
    make_ideal_step,
    model_forward,
    multinomial_sample_one_no_sync,
    own_copy,
    prefill,
    sample,
)
from tinyllm.lab.gptfast.model import (
    KVCache,
    ModelArgs,
    RMSNorm,
    Transformer,
    apply_rotary_emb,
    course_projections,
    find_multiple,
    from_course,
    interleave_rope_rows,
    precompute_freqs_cis,
)

__all__ = [
    "apply_rotary_emb",
    "compile_decode",
    "course_projections",
    "decode_n_tokens",
    "decode_next",
    "decode_one_token",
    "find_multiple",
    "from_course",
    "GENERATE_PY_INDUCTOR",
    "GENERATE_PY_SDPA",
    "inductor_settings",
    "interleave_rope_rows",
    "KVCache",
    "logits_to_probs",
    "make_decode_step",
    "make_forward_step",
    "make_ideal_step",
    "model_forward",
    "ModelArgs",
    "multinomial_sample_one_no_sync",
    "own_copy",
    "precompute_freqs_cis",
    "prefill",
    "RMSNorm",
    "sample",
    "TEMPERATURE",
    "TOP_K",
    "Transformer",
    "WARMUP_CALLS",
]
