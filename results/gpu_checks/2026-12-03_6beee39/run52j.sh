#!/usr/bin/env bash
# Device call J (issue 27): the fused kernel with its loads before PDL's wait, chunks, and the
# new key from registers, against the kernel before (probe52.py); then every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oJ; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run52j.sh .final/probe52.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 340 python3 .final/probe52.py $O/probe52.json 230 > $O/probe52.log 2>&1; echo rc $?; grep -E "^(1|8|256) |^sweep|^exact|^tokens|^op checks|^alone|^done|Error" $O/probe52.log | cut -c1-700
tar czf $OUT/runJ.tgz -C $O .
left=$((560 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -8 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runJ.tgz -C $O .
