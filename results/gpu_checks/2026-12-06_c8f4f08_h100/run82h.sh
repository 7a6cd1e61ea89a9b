#!/usr/bin/env bash
# Device call A of stop 58 (issue 27): probe82 (the combine folded into the output projection at
# 2 to 16 rows), then every cuda-marked test, on the branch proto/fold-rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "branch proto/fold-rows at $(cat proto82/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp proto82/run82h.sh proto82/probe82.py $O/
echo "== probe82 $(date -u +%T)"
PYTHONPATH=$R timeout 200 python3 proto82/probe82.py $O/probe82.json > $O/probe82.log 2>&1; echo rc $?
grep -vi warn $O/probe82.log | cut -c1-700 | tail -24
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 340 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs tests/ > $O/gpu_tests.log 2>&1; echo rc $?; tail -3 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
