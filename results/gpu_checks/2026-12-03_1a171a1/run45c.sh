#!/usr/bin/env bash
# Device call C (issue 27, stop 41): split_count up to 64 shares: the bench's paged section
# (results/h200_paged.json), then the step at batch 1, 2, 4, 8 against 16 shares (probe45.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run45c.sh .final/probe45.py $O/
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 175 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
tar czf $OUT/runC.tgz -C $O .
left=$((265 - SECONDS)); echo "== probe $(date -u +%T), $left s left"; PYTHONPATH=$R timeout $left python3 .final/probe45.py $O/probe45.json > $O/probe45.log 2>&1; echo rc $?; tail -c 2000 $O/probe45.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
