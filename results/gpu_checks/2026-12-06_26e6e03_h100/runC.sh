#!/usr/bin/env bash
# notebook 11 and its solutions under nbval-lax at main's commit; on an H200, probe82 too.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "main at $(cat .dev/COMMIT)"; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .dev/runC.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 170 python3 -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=150 -p no:cacheprovider -n 2 --dist loadfile notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval.log 2>&1; echo rc $?; tail -2 $O/nbval.log; grep -E "^FAILED|Error" $O/nbval.log | head
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "== probe82 on the H200 $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 results/gpu_checks/2026-12-06_c8f4f08_h100/probe82.py $O/probe82.json > $O/probe82.log 2>&1; echo rc $?; grep -vi warn $O/probe82.log | cut -c1-400 | tail -24
fi
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
