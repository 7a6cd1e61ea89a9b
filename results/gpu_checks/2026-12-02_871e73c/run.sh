#!/usr/bin/env bash
# Device call: PagedEngine at 1-256 rows, the PagedEngine before this change (.prev) and the
# engine before PagedEngine (.old) at 32-256 in the same call, tokens of all three compared,
# the GPU tests, every notebook under nbval-lax. Logs and JSON into $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
S=/tmp/site
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; echo "prev $(cat .prev/COMMIT)"; echo "old $(cat .old/COMMIT)"; } > $OUT/machine.txt 2>&1
echo "== scale $(date -u +%T)"; PYTHONPATH=$PWD timeout 90 python3 results/probes/engine_scale.py $OUT/scale.json > $OUT/scale.log 2>&1; grep -v capture $OUT/scale.log | tail -6 | cut -c1-220
echo "== prev scale $(date -u +%T)"; (cd .prev && PYTHONPATH=$PWD timeout 60 python3 prev_scale.py $OUT/prev_scale.json > $OUT/prev_scale.log 2>&1); tail -3 $OUT/prev_scale.log | cut -c1-220
echo "== old scale $(date -u +%T)"; (cd .old && PYTHONPATH=$PWD timeout 70 python3 old_scale.py $OUT/old_scale.json > $OUT/old_scale.log 2>&1); tail -3 $OUT/old_scale.log | cut -c1-220
echo "== cmp $(date -u +%T)"; PYTHONPATH=$PWD timeout 40 python3 .final/cmp.py new /tmp/new.json > $OUT/cmp.log 2>&1
(cd .prev && PYTHONPATH=$PWD timeout 40 python3 ../.final/cmp.py new /tmp/prev.json >> $OUT/cmp.log 2>&1)
(cd .old && PYTHONPATH=$PWD timeout 40 python3 ../.final/cmp.py old /tmp/old.json >> $OUT/cmp.log 2>&1)
python3 -c "
import json; a=json.load(open('/tmp/new.json')); p=json.load(open('/tmp/prev.json')); b=json.load(open('/tmp/old.json'))
for k in a:
    print('overlap', k, 'tokens identical new/prev:', a[k]['tokens']==p[k]['tokens'], 'new/old:', a[k]['tokens']==b[k]['tokens'], 'requests differing new/old:', sum(x!=y for x,y in zip(a[k]['tokens'], b[k]['tokens'])), 'of', len(a[k]['tokens']))
print('new overlap on/off tokens identical:', a['True']['tokens']==a['False']['tokens'])
" 2>&1 | tee -a $OUT/cmp.log
echo "== gpu tests $(date -u +%T)"; PYTHONPATH=$S:$PWD timeout 120 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/ > $OUT/gpu_tests.log 2>&1; tail -3 $OUT/gpu_tests.log
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=$S:$PWD timeout 150 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=140 notebooks/ > $OUT/notebooks.log 2>&1; tail -3 $OUT/notebooks.log
echo "== done $(date -u +%T)"
