#!/usr/bin/env bash
# Device call T: the paged GPU tests; PagedEngine at 1, 8 and 64 rows (lab.engine_time.scale, each in
# its own process); notebooks 08 and 09 with their solutions under nbval-lax (Jupyter wheels from .whl/).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oT; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
for n in 1 8 64; do echo "== scale $n $(date -u +%T)"; PYTHONPATH=$R timeout 45 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log; done
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 110 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 4 --dist loadfile --nbval-cell-timeout=100 notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb > $O/notebooks.log 2>&1; tail -2 $O/notebooks.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runT.sh .final/one_scale.py $O/; tar czf $OUT/runT.tgz -C $O .
