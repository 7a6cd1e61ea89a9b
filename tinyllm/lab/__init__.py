"""The lab: measurements of the book (tinyllm/). Nothing in the book imports it, and it uses
only the book's public names.

- bench: `python -m tinyllm.lab.bench` (make bench), the GPU measurements behind results/;
- prompts: the prompts every lesson and the bench decode from;
- timing: timing a step on a GPU, and its one profiling set-up (traced_steps); exactness:
  notebook 05's two comparisons;
- peers: the course's steps beside gpt-fast and torch.compile, timed alike in one run;
- anatomy: one decode step, op by op and kernel by kernel; results: recorded runs;
- simgraph: CUDA graphs simulated on a CPU, for capture and replay without a GPU;
- capture_policy: the serving engines' capture sizes side by side, their padding on the
  bench's engine workload, and their graphs' capture time and pool on a GPU;
- gptfast: gpt-fast's decode recipe on the course's weights, the peer the course measures
  itself against.
- hf: the course's model to and from a transformers Llama (to_hf, from_hf), transformers an
  optional extra; it never downloads.
"""
