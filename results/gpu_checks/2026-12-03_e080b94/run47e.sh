#!/usr/bin/env bash
# Device call E (issue 27, stop 42): the combine folded into the output projection against the
# step before and other launch settings (probe47.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run47e.sh .final/probe47.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 420 python3 .final/probe47.py $O/probe47.json 230 > $O/probe47.log 2>&1; echo rc $?; tail -c 6000 $O/probe47.log
tar czf $OUT/runE.tgz -C $O .
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
