#!/usr/bin/env bash
# Device call E (issue 27, stop 44): notebooks 05, 08 and 11 and the solutions of 08 and 11
# under nbval-lax; the fused kernel against itself with masked key and value loads (probe58.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run58e.sh .final/probe58.py .final/variants2.py $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile notebooks/05_bit_exactness.ipynb notebooks/08_paged_kv.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -3 $O/nbval/nbval.log
tar czf $OUT/runE.tgz -C $O .
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 .final/probe58.py $O/probe58.json 110 > $O/probe58.log 2>&1; echo rc $?; grep -E "^(1|8|256) |^sweep|^exact|^tokens|^alone|^done|Error" $O/probe58.log | cut -c1-700
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
