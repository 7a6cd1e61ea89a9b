#!/usr/bin/env bash
# Device call G (issue 27, stop 42): the combine folded into the output projection, one row's
# programs of 8 outputs and 1 warp, against the step before and other sizes (probe49.py);
# the bench's paged section (results/h200_paged.json); every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oG; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run49g.sh .final/probe49.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 100 python3 .final/probe49.py $O/probe49.json 60 > $O/probe49.log 2>&1; echo rc $?; grep -E "^(1|8) |^sweep|^exact|^op checks|^done" $O/probe49.log | cut -c1-300
tar czf $OUT/runG.tgz -C $O .
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
tar czf $OUT/runG.tgz -C $O .
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | grep -v "already exists" | tail -2
echo "== notebooks $(date -u +%T)"
env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 150 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile --nbval-cell-timeout=100 notebooks/08_paged_kv.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -4 $O/notebooks.log
echo "== done $(date -u +%T)"; tar czf $OUT/runG.tgz -C $O .
