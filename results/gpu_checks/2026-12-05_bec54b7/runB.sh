#!/usr/bin/env bash
# Device call B (stop 50): notebooks 09 and 11 and their solutions under nbval-lax at the
# stop's commit (09's host sections rewritten, 11's R.3 with its fifth try).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oB; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runB.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 500 python3 -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=450 -p no:cacheprovider -n 4 --dist loadfile notebooks/09_the_engine_around_the_graph.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -3 $O/nbval/nbval.log; grep -E "^FAILED|Error" $O/nbval/nbval.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runB.tgz -C $O .
