#!/usr/bin/env bash
# Device call D (issue 27, stop 47): the package's kernels with PDL's trigger before the wait
# (probe66.py, variants6.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runD.sh .final/probe66.py .final/variants6.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 400 python3 .final/probe66.py $O/probe66.json > $O/probe66.log 2>&1; echo rc $?; grep -E "^batch|check|^done|Error" $O/probe66.log | cut -c1-900
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
