#!/usr/bin/env bash
# Device call C (issue 27): the bench's paged section with its sweep timed by bins of steps
# back to back (results/h200_paged.json); the probe again after one row's projection sums a
# 2-D product (results/h200_projections.json); notebook 11 and its solutions under nbval-lax.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run42c.sh .final/probe42.py $O/
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 160 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
tar czf $OUT/runC.tgz -C $O .
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 150 python3 .final/probe42.py $O/probe42.json 105 > $O/probe42.log 2>&1; echo rc $?; tail -c 3500 $O/probe42.log
tar czf $OUT/runC.tgz -C $O .
left=$((420 - SECONDS)); echo "== notebooks $(date -u +%T), $left s left"
env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout $left python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile --nbval-cell-timeout=150 notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -6 $O/notebooks.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
