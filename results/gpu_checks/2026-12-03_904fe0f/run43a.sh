#!/usr/bin/env bash
# Device call A (issue 27, stop 41): the paged step's attention by tiles of 64 keys and with the
# combine in its last program: the probe (checks, the ops alone, the step now and before at
# batch 1 to 256, the sweep, replay against eager, tokens), the bench's paged section, every
# cuda test, notebook 11 under nbval-lax.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run43a.sh .final/probe43.py .final/kernels_a1c9e5c.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 280 python3 .final/probe43.py $O/probe43.json 215 > $O/probe43.log 2>&1; echo rc $?; tail -c 5000 $O/probe43.log
tar czf $OUT/runA.tgz -C $O .
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600
tar czf $OUT/runA.tgz -C $O .
echo "== notebooks $(date -u +%T)"
env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 60 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile --nbval-cell-timeout=50 notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -4 $O/notebooks.log
tar czf $OUT/runA.tgz -C $O .
left=$((585 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -15 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
