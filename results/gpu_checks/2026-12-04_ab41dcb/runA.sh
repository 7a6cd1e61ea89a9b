#!/usr/bin/env bash
# Device call A (issue 27, stop 47): the short-row path of the fused op against the package's
# (probe64.py, variants4.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runA.sh .final/probe64.py .final/variants4.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 400 python3 .final/probe64.py $O/probe64.json > $O/probe64.log 2>&1; echo rc $?; grep -E "^batch|check|^done|Error" $O/probe64.log | cut -c1-900
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
