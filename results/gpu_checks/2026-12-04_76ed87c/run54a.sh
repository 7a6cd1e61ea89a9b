#!/usr/bin/env bash
# Device call A (issue 27, stop 44): tensor-core and chunked fused kernels against the package's (probe54.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run54a.sh .final/probe54.py .final/variants.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 520 python3 .final/probe54.py $O/probe54.json 380 > $O/probe54.log 2>&1; echo rc $?; grep -E "^(1|8|256) |^sweep|^exact|^tokens|^score|^alone|^done|Error" $O/probe54.log | cut -c1-3000
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
