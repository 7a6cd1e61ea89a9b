#!/usr/bin/env bash
# Device call C (issue 27, stop 44): notebooks 08 and 11 and their solutions under nbval-lax,
# notebook 11 executed on the GPU; batch 8 with 16 and 32 shares and other forms (probe56.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run56c.sh .final/probe56.py $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
export PYTHONPATH=/tmp/site:$R
echo "== nbval $(date -u +%T)"; timeout 240 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile notebooks/08_paged_kv.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -3 $O/nbval/nbval.log
echo "== nb11 on the GPU $(date -u +%T)"; cp notebooks/11_what_a_graph_leaves.ipynb /tmp/nb11.ipynb; (cd notebooks && timeout 150 python3 -m jupyter nbconvert --to notebook --execute --output /tmp/oC/nbval/nb11_gpu.ipynb --ExecutePreprocessor.timeout=140 11_what_a_graph_leaves.ipynb > $O/nbval/nbconvert.log 2>&1); echo rc $?
python3 -c "
import json
nb=json.load(open('$O/nbval/nb11_gpu.ipynb'))
for i in (27,):
    print(i, ''.join(o.get('text','') for o in nb['cells'][i].get('outputs',[])))
" 2>&1 | head -8
tar czf $OUT/runC.tgz -C $O .
for s in 16 32; do echo "== probe $s shares $(date -u +%T)"; PYTHONPATH=$R timeout 150 python3 .final/probe56.py $O/probe56_$s.json $s > $O/probe56_$s.log 2>&1; echo rc $?; grep -E "step|sweep|done|Error" $O/probe56_$s.log | cut -c1-400; tar czf $OUT/runC.tgz -C $O .; done
echo "== done $(date -u +%T)"
