#!/usr/bin/env bash
# Device call C (issue 27, stop 47): notebook 11 and its solutions under nbval-lax, after its part
# "Two more tries at the op alone".
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runC.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -2 $O/nbval/nbval.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
