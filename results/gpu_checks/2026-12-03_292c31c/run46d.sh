#!/usr/bin/env bash
# Device call D (issue 27, stop 42): the combine folded into the output projection against the
# step before (probe46.py); then the bench's paged section (results/h200_paged.json).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run46d.sh .final/probe46.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 330 python3 .final/probe46.py $O/probe46.json 230 > $O/probe46.log 2>&1; echo rc $?; tail -c 6000 $O/probe46.log
tar czf $OUT/runD.tgz -C $O .
left=$((585 - SECONDS)); echo "== bench paged $(date -u +%T), $left s left"; PYTHONPATH=$R timeout $left python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
