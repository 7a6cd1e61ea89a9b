#!/usr/bin/env bash
# Device call F (issue 27, stop 44): notebooks 08 and 11 and their solutions under nbval-lax at
# the final commit; the cuda tests of the fused kernel against its reference.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oF; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run59f.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 100 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile notebooks/08_paged_kv.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -2 $O/nbval/nbval.log
echo "== kernel tests $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py -k "fused_kernel or triton_kernels" > $O/gpu_tests.log 2>&1; echo rc $?; tail -2 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runF.tgz -C $O .
