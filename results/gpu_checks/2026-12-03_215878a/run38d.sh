#!/usr/bin/env bash
# Device call D (2026-12-03, second session): notebooks 08-11 with their solutions under
# nbval-lax at the stop's commit (Jupyter's wheels from .whl/), then every cuda test.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run38d.sh $O/
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 170 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=120 notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -3 $O/notebooks.log
tar czf $OUT/runD.tgz -C $O .
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 250 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu.py tests/test_gpu_paged.py tests/test_gpu_fused.py tests/test_kernels.py > $O/gpu_tests.log 2>&1; tail -4 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
