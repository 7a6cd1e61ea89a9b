"""The lab: measurements of the book (tinyllm/). Nothing in the book imports it.

bench (python -m tinyllm.lab.bench), results (recorded runs), anatomy (a decode step op by op),
simgraph (CUDA graphs simulated on the CPU, for capture and replay without a GPU).
"""
