#!/usr/bin/env bash
# Device call B2 (2026-12-03, second session), the first try fixed: the fused paged kernel that combines its own
# shares (no combine kernel), and notebooks 08-11 with their solutions under nbval-lax. Every cuda test; the bench's paged section; greedy tokens of the
# paged decoder against the package before the change (5f41911).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run38c.sh .final/tokens27.py $O/
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu.py tests/test_gpu_paged.py tests/test_gpu_fused.py tests/test_kernels.py > $O/gpu_tests.log 2>&1; tail -15 $O/gpu_tests.log
tar czf $OUT/runC.tgz -C $O .
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^measured|^headline" $O/bench_paged.log | cut -c1-300
tar czf $OUT/runC.tgz -C $O .
echo "== tokens before and after $(date -u +%T)"
PYTHONPATH=$R/.final/old timeout 60 python3 .final/tokens27.py $O/tokens_before.pt > $O/tokens.log 2>&1
PYTHONPATH=$R timeout 60 python3 .final/tokens27.py $O/tokens_after.pt >> $O/tokens.log 2>&1
python3 -c "
import torch; a=torch.load('$O/tokens_before.pt'); b=torch.load('$O/tokens_after.pt')
for k in a: print('batch', k[0], 'compile', k[1], 'tokens equal share', round((a[k]==b[k]).float().mean().item(), 4), 'rows identical', int((a[k]==b[k]).all(1).sum()), 'of', a[k].shape[0])
" 2>&1 | tee $O/tokens_compare.txt; tail -3 $O/tokens.log
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 170 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=120 notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/notebooks.log 2>&1; tail -3 $O/notebooks.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
