#!/usr/bin/env bash
# Device call H (issue 27, stop 45): the floor of a node and of a grid-wide barrier, in one run
# (python -m tinyllm.lab.floor); every cuda test; the bench's paged section.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oH; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run60h.sh $O/
echo "== floor $(date -u +%T)"; PYTHONPATH=$R timeout 120 python3 -m tinyllm.lab.floor $O/h200_floor.json > $O/floor.log 2>&1; echo rc $?; tail -5 $O/floor.log; python3 -c "
import json; d = json.load(open('$O/h200_floor.json'))
for k in ('torch add_', 'triton', 'triton, PDL'): print(k, d[k])
for k, v in d['barriers'].items(): print('barriers', k, v)"
tar czf $OUT/runH.tgz -C $O .
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 300 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_floor.py tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -4 $O/gpu_tests.log
tar czf $OUT/runH.tgz -C $O .
left=$((570 - SECONDS)); echo "== bench $(date -u +%T), $left s left"; PYTHONPATH=$R timeout $left python3 -m tinyllm.lab.bench --sections paged --out $O/paged_bench.json > $O/bench.log 2>&1; echo rc $?; grep -E "^headline|^wrote" $O/bench.log | cut -c1-700
echo "== done $(date -u +%T)"; tar czf $OUT/runH.tgz -C $O .
