#!/usr/bin/env bash
# Device calls J2 and J3 (issue 27), on the machine of call J, right after it: probe76 with
# TEARDOWN_CUPTI set inside the process (2 runs, then 6), and once with it set from the start.
# J2:
export PYTHONUNBUFFERED=1; mkdir -p /tmp/o
for i in 1 2; do env -u TEARDOWN_CUPTI PYTHONPATH=$PWD timeout 45 python3 .final/probe76.py /tmp/o/probe76_set_$i.json set > /tmp/o/probe76_set_$i.log 2>&1; echo rc $?; done
TEARDOWN_CUPTI=1 PYTHONPATH=$PWD timeout 45 python3 .final/probe76.py /tmp/o/probe76_env.json unset > /tmp/o/probe76_env.log 2>&1; echo rc $?
# J3:
for i in 3 4 5 6 7 8; do env -u TEARDOWN_CUPTI PYTHONPATH=$PWD timeout 40 python3 .final/probe76.py /tmp/o/probe76_set_$i.json set > /tmp/o/probe76_set_$i.log 2>&1; echo rc $?; done
