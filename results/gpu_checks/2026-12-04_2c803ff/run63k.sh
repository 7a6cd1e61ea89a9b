#!/usr/bin/env bash
# Device call K (issue 27, stop 45): the fused kernel reading its block with the row's length
# where a share is one block (probe63.py, variants3.py), against the package's.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oK; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run63k.sh .final/probe63.py .final/variants3.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 330 python3 .final/probe63.py $O/probe63.json 220 > $O/probe63.log 2>&1; echo rc $?; grep -E "^step|^sweep|^exact|^tokens|^alone|^done|Error" $O/probe63.log | cut -c1-600
echo "== done $(date -u +%T)"; tar czf $OUT/runK.tgz -C $O .
