#!/usr/bin/env bash
# The paged GPU tests, then PagedEngine at 8 rows with compile=False and compile=True, one call.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/o5; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$PWD timeout 100 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
echo "== compile $(date -u +%T)"; PYTHONPATH=$PWD timeout 280 python3 results/probes/engine_scale_compile.py $O/compile.json 8 > $O/compile.log 2>&1; python3 -c "
import json
for r in json.load(open('$O/compile.json')): print(r['compile'], r['n_rows'], r['tok_s'], r['first_run_tok_s'], r['host_us_per_step'], r['replay_alone_us'], r['gpu_busy_share'], r['capture_and_compile_s'], r['tokens_identical_across_runs'])"; tail -2 $O/compile.log | cut -c1-300
echo "== done $(date -u +%T)"; tar czf $OUT/run5.tgz -C $O .
