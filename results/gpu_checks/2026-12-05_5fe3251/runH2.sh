#!/usr/bin/env bash
# Device call H2 (issue 27): notebooks 07, 08, 10 and 11 and their solutions under nbval-lax at the
# stop's last commit, then every cuda-marked test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oH2; mkdir -p $O/nbval; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runH2.sh $O/
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $O/pip.log 2>&1; echo pip $?
echo "== nbval $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 150 python3 -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=150 -p no:cacheprovider -n 8 --dist loadfile notebooks/08_paged_kv.ipynb notebooks/07_graphs_and_torch_compile.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/11_what_a_graph_leaves.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/07_graphs_and_torch_compile_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb notebooks/solutions/11_what_a_graph_leaves_solutions.ipynb > $O/nbval/nbval.log 2>&1; echo rc $?; tail -3 $O/nbval/nbval.log; grep -E "^FAILED|Error" $O/nbval/nbval.log | head
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 330 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs tests/ > $O/gpu_tests.log 2>&1; echo rc $?; tail -3 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runH2.tgz -C $O .
