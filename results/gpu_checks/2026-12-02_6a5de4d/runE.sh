#!/usr/bin/env bash
# Device call E: notebooks 07, 08 and 09 with their solutions under nbval-lax (Jupyter wheels
# from .whl/), as they stand at the end of the stop.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 420 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=300 notebooks/07_graphs_and_torch_compile.ipynb notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/solutions/07_graphs_and_torch_compile_solutions.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb > $O/notebooks.log 2>&1; echo rc=$?; tail -5 $O/notebooks.log
echo "== done $(date -u +%T)"; cp .final/runE.sh $O/; tar czf $OUT/runE.tgz -C $O .
