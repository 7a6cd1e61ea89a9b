#!/usr/bin/env bash
# Device call A (issue 27, stop 50): the op alone and the paged fused step, the package's
# fused kernel now (sums or tensor cores chosen a row at a time, on the device) against before
# (0abd23e); then every cuda-marked test at the tree sent.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runA.sh .final/probe71.py .final/probe72.py .final/before.py $O/
echo "== op $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 .final/probe71.py $O/probe71.json > $O/probe71.log 2>&1; echo rc $?; grep -vE "^\s*$" $O/probe71.log | tail -40 | cut -c1-700
echo "== step $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 .final/probe72.py $O/probe72.json 120 > $O/probe72.log 2>&1; echo rc $?; grep -E "^step|^sweep|^exact|^tokens|^done|Error" $O/probe72.log | cut -c1-300
echo "== step16 $(date -u +%T)"; PYTHONPATH=$R timeout 90 python3 .final/probe72.py $O/probe72s16.json 50 16 > $O/probe72s16.log 2>&1; echo rc $?; grep -E "^step|^sweep|^exact|^tokens|^done|Error" $O/probe72s16.log | cut -c1-300
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 150 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py tests/test_kernels.py tests/test_projections.py tests/test_floor.py tests/test_pages.py > $O/gpu_tests.log 2>&1; echo rc $?; tail -3 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
