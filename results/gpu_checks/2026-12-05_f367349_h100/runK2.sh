#!/usr/bin/env bash
# Device call K (issue 27): probe78, the step at 2 and 4 warps in one process, written straight into $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt; cp .final/runK2.sh .final/probe78.py $OUT/
PYTHONPATH=$PWD timeout 130 python3 .final/probe78.py $OUT/probe78.json > $OUT/probe78.log 2>&1; echo rc $?; grep -E "^batch|Error" $OUT/probe78.log | cut -c1-600; date -u +%T
