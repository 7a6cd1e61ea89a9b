#!/usr/bin/env bash
# Device call F: every cuda test; PagedEngine at this commit (new) and at .prev/ (prev, the engine
# before the step read its own input ids) one after the other at 32, 128 and 256 rows, each in
# its own process (round 1); new at 1, 8, 64 rows; tokens and schedules of new and prev compared.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oF; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) prev $(cat .prev/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== gpu tests $(date -u +%T)"; timeout 280 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/ > $O/gpu_tests.log 2>&1; tail -2 $O/gpu_tests.log
echo "== scale $(date -u +%T)"
for n in 32 128 256; do
  PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
  (cd .prev && PYTHONPATH=$R/.prev timeout 60 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
done
echo "== small $(date -u +%T)"; PYTHONPATH=$R timeout 70 python3 .final/small_scale.py $O/small.json > $O/small.log 2>&1; tail -3 $O/small.log | cut -c1-200
echo "== cmp $(date -u +%T)"; PYTHONPATH=$R timeout 50 python3 .final/cmp2.py new /tmp/new.json > $O/cmp.log 2>&1
(cd .prev && PYTHONPATH=$R/.prev timeout 50 python3 $R/.final/cmp2.py prev /tmp/prev.json >> $O/cmp.log 2>&1)
python3 -c "
import json; a=json.load(open('/tmp/new.json')); b=json.load(open('/tmp/prev.json'))
for k in a:
    print('overlap', k, 'tokens identical new/prev:', a[k]['tokens']==b[k]['tokens'], 'schedule identical:', a[k]['schedule']==b[k]['schedule'], 'requests differing:', sum(x!=y for x,y in zip(a[k]['tokens'], b[k]['tokens'])), 'of', len(a[k]['tokens']))
print('new overlap on/off tokens identical:', a['True']['tokens']==a['False']['tokens'])
" 2>&1 | tee -a $O/cmp.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runF.sh .final/one_scale.py .final/small_scale.py .final/cmp2.py $O/; tar czf $OUT/runF.tgz -C $O .
