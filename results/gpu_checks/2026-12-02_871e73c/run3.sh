#!/usr/bin/env bash
# One call: PagedEngine at 1-256 rows, the PagedEngine before this change (.prev) and the engine
# before PagedEngine (.old) at 32-256, all in the same call, packed into one file.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/o3; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; echo "prev $(cat .prev/COMMIT)"; echo "old $(cat .old/COMMIT)"; } > $O/machine.txt 2>&1
echo "== new $(date -u +%T)"; PYTHONPATH=$PWD timeout 100 python3 results/probes/engine_scale.py $O/scale.json > $O/scale.log 2>&1; python3 -c "
import json
for r in json.load(open('$O/scale.json')): print('new', r['n_rows'], r['tok_s'], r['host_us_per_step'], r['replay_alone_us'], r['gpu_busy_share'], r['first_run_tok_s'], r['capture_s'])"
echo "== prev $(date -u +%T)"; (cd .prev && PYTHONPATH=$PWD timeout 60 python3 prev_scale.py $O/prev_scale.json > $O/prev_scale.log 2>&1); python3 -c "
import json
for r in json.load(open('$O/prev_scale.json')): print('prev', r['n_rows'], r['tok_s'], r['host_us_per_step'], r['replay_alone_us'], r['gpu_busy_share'])"
echo "== old $(date -u +%T)"; (cd .old && PYTHONPATH=$PWD timeout 70 python3 old_scale.py $O/old_scale.json > $O/old_scale.log 2>&1); python3 -c "
import json
for r in json.load(open('$O/old_scale.json')): print('old', r['n_rows'], r['tok_s'], r['host_us_per_step'])"
echo "== done $(date -u +%T)"; tar czf $OUT/run3.tgz -C $O .
