#!/usr/bin/env bash
# Device call E: PagedEngine with compile=False then compile=True at 32, 128 and 256 rows, one
# process (results/probes/engine_scale_compile.py), each size written as it ends. $OUT/runE.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oE; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== compile $(date -u +%T)"; PYTHONPATH=$PWD timeout 555 python3 results/probes/engine_scale_compile.py $O/compile.json 32,256,128 > $O/compile.log 2>&1
python3 -c "
import json
for r in json.load(open('$O/compile.json')): print(r['compile'], r['n_rows'], r['tok_s'], r['first_run_tok_s'], r['host_us_per_step'], r['replay_alone_us'], r['gpu_busy_share'], r['capture_and_compile_s'], r['tokens_identical_across_runs'])"; tail -2 $O/compile.log | cut -c1-300
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
