#!/usr/bin/env bash
# Device call G1 (issue 27): probe74 twice, in two processes: torch's default, then with
# TEARDOWN_CUPTI=1 (Kineto tears CUPTI down when a profiler session ends: pytorch#144455).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oG1; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,clocks.sm,clocks.mem --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; git status --short | head -5; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runG1.sh .final/probe74.py $O/
echo "== probe74 $(date -u +%T)"; PYTHONPATH=$R timeout 260 python3 .final/probe74.py $O/probe74.json > $O/probe74.log 2>&1; echo rc $?; grep -v Warning $O/probe74.log | cut -c1-1500 | tail -8
echo "== probe74, TEARDOWN_CUPTI=1 $(date -u +%T)"; TEARDOWN_CUPTI=1 PYTHONPATH=$R timeout 230 python3 .final/probe74.py $O/probe74_teardown.json > $O/probe74_teardown.log 2>&1; echo rc $?; grep -v Warning $O/probe74_teardown.log | cut -c1-1500 | tail -8
echo "== done $(date -u +%T)"; tar czf $OUT/runG1.tgz -C $O .
