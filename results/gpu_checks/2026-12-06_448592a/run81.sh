#!/usr/bin/env bash
# Device call of stop 56 (issue 27): probe79's op sweep (a split's floor of blocks), then every
# cuda-marked test, with the Jupyter wheels carried as .whl/ (the widgets' tests import them).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat proto79/COMMIT) with proto79/ (untracked)"; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt; cp proto79/run81.sh proto79/probe79.py proto79/variant79.py $OUT/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1; echo pip $?
echo "== probe79 $(date -u +%T)"
PYTHONPATH=$R timeout 150 python3 proto79/probe79.py $OUT/probe79.json --no-steps > $OUT/probe79.log 2>&1; echo rc $?
grep -vi warn $OUT/probe79.log | cut -c1-1200 | tail -14
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 320 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/ > $OUT/gpu_tests.log 2>&1; echo rc $?; tail -3 $OUT/gpu_tests.log; grep -E "^FAILED|Error" $OUT/gpu_tests.log | head
echo "== done $(date -u +%T)"
