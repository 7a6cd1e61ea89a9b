#!/usr/bin/env bash
# Device call D: PagedEngine (new) and Engine(kv="paged") (old, .old/) interleaved at 32, 128 and
# 256 rows, each in its own process, two rounds; the new engine at 1, 8 and 64 rows; the tokens
# of both compared (greedy and seeded with an eos, overlap off and on). Into $OUT/runD.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) old $(cat .old/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; timeout 100 python3 -m pytest -q -x -m cuda -p no:cacheprovider tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
PYTHONPATH=$R timeout 60 python3 .final/micro.py > $O/micro.json 2>>$O/err.log; cat $O/micro.json
for round in 1 2; do for n in 32 128 256; do
  PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
  (cd .old && PYTHONPATH=$R/.old timeout 60 python3 $R/.final/one_scale.py old $n $O/runs.jsonl 2>>$O/err.log)
done; done
echo "== small $(date -u +%T)"; PYTHONPATH=$R timeout 90 python3 .final/small_scale.py $O/small.json > $O/small.log 2>&1; tail -3 $O/small.log | cut -c1-200
echo "== cmp $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/cmp.py new /tmp/new.json > $O/cmp.log 2>&1
(cd .old && PYTHONPATH=$R/.old timeout 60 python3 $R/.final/cmp.py old /tmp/old.json >> $O/cmp.log 2>&1)
python3 -c "
import json; a=json.load(open('/tmp/new.json')); b=json.load(open('/tmp/old.json'))
for k in a:
    print('overlap', k, 'tokens identical new/old:', a[k]['tokens']==b[k]['tokens'], 'requests differing:', sum(x!=y for x,y in zip(a[k]['tokens'], b[k]['tokens'])), 'of', len(a[k]['tokens']))
print('new overlap on/off tokens identical:', a['True']['tokens']==a['False']['tokens'])
" 2>&1 | tee -a $O/cmp.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runD.sh .final/one_scale.py .final/small_scale.py .final/cmp.py .final/micro.py $O/; tar czf $OUT/runD.tgz -C $O .
