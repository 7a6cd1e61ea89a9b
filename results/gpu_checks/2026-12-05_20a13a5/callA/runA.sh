#!/usr/bin/env bash
# Device call A (issue 27, stop 48): the op alone, the package's against a clustered kernel
# whose shares meet at a cluster barrier (probe68.py, variants7.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runA.sh .final/probe68.py .final/variants7.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 500 python3 .final/probe68.py $O/probe68.json > $O/probe68.log 2>&1; echo rc $?; grep -vE "^\s*$" $O/probe68.log | tail -40 | cut -c1-1500
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
