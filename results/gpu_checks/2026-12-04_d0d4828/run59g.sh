#!/usr/bin/env bash
# Device call G (issue 27, stop 45): the fused kernel whose last program combines, against the
# kernel before (probe59.py); every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oG; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run59g.sh .final/probe59.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 300 python3 .final/probe59.py $O/probe59.json 200 > $O/probe59.log 2>&1; echo rc $?; grep -E "^step|^sweep|^exact|^tokens|^alone|^done|Error" $O/probe59.log | cut -c1-700
tar czf $OUT/runG.tgz -C $O .
left=$((580 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -8 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runG.tgz -C $O .
