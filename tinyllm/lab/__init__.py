"""The lab: measurements of the book (tinyllm/). Nothing in the book imports it.

bench (python -m tinyllm.lab.bench), results (recorded runs), anatomy (a decode step op by op),
gptfast (gpt-fast's decode recipe on the course's weights, to compare the course's step with).
"""
