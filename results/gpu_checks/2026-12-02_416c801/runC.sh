#!/usr/bin/env bash
# Device call C: every cuda test; notebooks 08 and 09 with their solutions under nbval-lax
# (Jupyter wheels from .whl/); the fused-kernel probe again with today's split rule.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 150 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 4 --dist loadfile --nbval-cell-timeout=120 notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb > $O/notebooks.log 2>&1; tail -3 $O/notebooks.log
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 330 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=8 tests/test_gpu.py tests/test_gpu_paged.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -14 $O/gpu_tests.log
cp .final/runC.sh .final/fused_probe.py $O/; tar czf $OUT/runC.tgz -C $O .
echo "== fused probe $(date -u +%T)"; PYTHONPATH=$R timeout 80 python3 .final/fused_probe.py $O/fused_probe.json > $O/fused_probe.log 2>&1; tail -c 2000 $O/fused_probe.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
