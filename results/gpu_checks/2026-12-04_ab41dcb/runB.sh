#!/usr/bin/env bash
# Device call B (issue 27, stop 47): the short-row path of the fused op against the package's
# (probe65.py, variants5.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oB; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runB.sh .final/probe65.py .final/variants5.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 400 python3 .final/probe65.py $O/probe65.json > $O/probe65.log 2>&1; echo rc $?; grep -E "^batch|check|^done|Error" $O/probe65.log | cut -c1-900
echo "== done $(date -u +%T)"; tar czf $OUT/runB.tgz -C $O .
