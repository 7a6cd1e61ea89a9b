#!/usr/bin/env bash
# Device call E (issue 27, stop 47): the paged fused step with the fused kernel's PDL trigger
# before its wait (probe67.py, variants6.py), against the package's.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runE.sh .final/probe67.py .final/variants6.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 380 python3 .final/probe67.py $O/probe67.json 260 > $O/probe67.log 2>&1; echo rc $?; grep -E "^step|^sweep|^exact|^tokens|^alone|^done|Error" $O/probe67.log | cut -c1-600
echo "== done $(date -u +%T)"; tar czf $OUT/runK.tgz -C $O .
