#!/usr/bin/env bash
# Device call of stop 59 (issue 27): main at $(cat proto85/COMMIT). On an H200 first probe82
# (the fold at 2 to 16 rows, the op alone at 128 and 1024 keys). On any GPU: every cuda-marked
# test, then every notebook and its solutions under nbval-lax (8 workers, a file each).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "main at $(cat proto85/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp proto85/run.sh proto85/probe82.py $O/
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "== probe82 $(date -u +%T)"
  PYTHONPATH=$R timeout 200 python3 proto85/probe82.py $O/probe82.json > $O/probe82.log 2>&1; echo rc $?
  grep -vi warn $O/probe82.log | cut -c1-700 | tail -24
fi
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 330 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs tests/ > $O/gpu_tests.log 2>&1; echo rc $?; tail -3 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 230 env -u MPLBACKEND python3 -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=200 -p no:cacheprovider -n 8 --dist loadfile notebooks/ > $O/nbval.log 2>&1; echo rc $?; tail -4 $O/nbval.log; grep -E "^FAILED" $O/nbval.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/run.tgz -C $O .
