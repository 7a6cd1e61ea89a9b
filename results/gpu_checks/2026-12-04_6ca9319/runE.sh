#!/usr/bin/env bash
# Device call E (issue 27): the most that joining the sampler to the step's last kernel could
# save (join_bound.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runE.sh .final/join_bound.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 300 python3 .final/join_bound.py $O/join_bound.json > $O/probe.log 2>&1; echo rc $?; grep -v Warn $O/probe.log | tail -8
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
