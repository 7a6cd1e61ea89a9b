#!/usr/bin/env bash
# Device call A (2026-12-03, second session): the bench's paged section, whose sweep now
# replays the windowed steps alone too (lab.pages.walked), so notebook 08's first figure
# draws one recording and one timing method.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run38a.sh $O/
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 500 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^measured|^headline|wrote" $O/bench_paged.log | cut -c1-400; tail -5 $O/bench_paged.log
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
