#!/usr/bin/env bash
# Device call M: where PagedEngine's host time goes at 128 and 256 rows; the floor of a graph node.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oM; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== floor $(date -u +%T)"; PYTHONPATH=$PWD timeout 120 python3 .final/floor.py $O/floor.json > $O/floor.log 2>&1; tail -4 $O/floor.log
for n in 256 128; do echo "== hostprof $n $(date -u +%T)"; PYTHONPATH=$PWD timeout 200 python3 .final/hostprof.py $n $O/hostprof_$n > $O/hostprof_$n.log 2>&1; tail -22 $O/hostprof_$n.log; done
echo "== done $(date -u +%T)"; cp .final/runM.sh .final/hostprof.py .final/floor.py $O/; tar czf $OUT/runM.tgz -C $O .
