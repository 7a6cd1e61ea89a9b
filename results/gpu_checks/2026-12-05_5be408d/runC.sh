#!/usr/bin/env bash
# Device call C (stop 49): every cuda-marked test at the stop's commit (the checkers' new
# time_limit and argument check among what they import).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runC.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 500 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/ > $O/gpu_tests.log 2>&1; echo rc $?; tail -4 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
