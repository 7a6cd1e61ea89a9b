#!/usr/bin/env bash
# Device call A (issue 27): the hand-written projection kernels and PDL on the course's
# kernels: checks, the paged step at batch 1, 8, 16, 32 against its parts turned off and
# gpt-fast + PDL, replay against eager, greedy tokens now against before; the GPU tests.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run40a.sh .final/probe40.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 400 python3 .final/probe40.py $O/probe40.json 330 > $O/probe40.log 2>&1; echo rc $?; tail -c 6000 $O/probe40.log
tar czf $OUT/runA.tgz -C $O .
left=$((575 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu.py tests/test_gpu_paged.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -25 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
