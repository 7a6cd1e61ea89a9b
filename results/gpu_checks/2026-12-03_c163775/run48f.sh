#!/usr/bin/env bash
# Device call F (issue 27, stop 42): the combine folded into the output projection, one row's
# programs of 8 outputs and 1 warp, against the step before and other sizes (probe48.py);
# the bench's paged section (results/h200_paged.json); every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oF; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run48f.sh .final/probe48.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 .final/probe48.py $O/probe48.json 120 > $O/probe48.log 2>&1; echo rc $?; grep -E "^(1|8) |^sweep|^exact|^op checks|^done" $O/probe48.log | cut -c1-300
tar czf $OUT/runF.tgz -C $O .
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
tar czf $OUT/runF.tgz -C $O .
left=$((590 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -8 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runF.tgz -C $O .
