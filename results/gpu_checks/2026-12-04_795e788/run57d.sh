#!/usr/bin/env bash
# Device call D (issue 27, stop 44): the package's fused kernel now against the kernel before
# (probe57.py); notebook 11's kernel check on the GPU (cell27.py); the bench's paged section;
# every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run57d.sh .final/probe57.py .final/cell27.py $O/
echo "== cell 27 $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/cell27.py > $O/cell27.log 2>&1; echo rc $?; cat $O/cell27.log | tail -3
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 .final/probe57.py $O/probe57.json 130 > $O/probe57.log 2>&1; echo rc $?; grep -E "^(1|2|4|8|256) |^sweep|^exact|^tokens|^alone|^done|Error" $O/probe57.log | cut -c1-900
tar czf $OUT/runD.tgz -C $O .
echo "== bench $(date -u +%T)"; PYTHONPATH=$R timeout 190 python3 -m tinyllm.lab.bench --sections paged --out $O/paged_bench.json > $O/bench.log 2>&1; echo rc $?; grep -E "^headline|^wrote" $O/bench.log | cut -c1-700
tar czf $OUT/runD.tgz -C $O .
left=$((585 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -8 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
