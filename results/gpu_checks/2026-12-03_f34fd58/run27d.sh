#!/usr/bin/env bash
# Device call D: notebooks 09, 10 and 11 with their solutions under nbval-lax (11's live floor
# cell runs on the GPU), Jupyter's wheels from .whl/.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run27d.sh $O/
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=150 notebooks/09_the_engine_around_the_graph.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -3 $O/notebooks.log
echo "== 11 executed $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 120 python3 -m jupyter nbconvert --to notebook --execute --output-dir $O notebooks/11_what_a_graph_leaves.ipynb > $O/executed11.log 2>&1; python3 -c "
import json; nb=json.load(open('$O/11_what_a_graph_leaves.ipynb'))
for c in nb['cells']:
    if c['cell_type']=='code' and 'node_floor(ks' in ''.join(c['source']):
        print(''.join(''.join(o.get('text','')) for o in c['outputs']))
" | tee $O/live_floor.txt
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
