#!/usr/bin/env bash
# Device call J: PagedEngine at this commit (new) and Engine(kv="paged") at 3b7d57b (old, .old/)
# one after the other at 32, 128 and 256 rows, each in its own process, two rounds; new at 1, 8
# and 64 rows; the tokens and schedules of both compared (greedy and seeded, eos, overlap off/on).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oJ; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) old $(cat .old/COMMIT)"; nproc; } > $O/machine.txt 2>&1
for round in 1 2; do echo "== round $round $(date -u +%T)"; for n in 32 128 256; do
  if [ $round = 1 ]; then
    PYTHONPATH=$R timeout 50 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
    (cd .old && PYTHONPATH=$R/.old timeout 50 python3 $R/.final/one_scale.py old $n $O/runs.jsonl 2>>$O/err.log)
  else
    (cd .old && PYTHONPATH=$R/.old timeout 50 python3 $R/.final/one_scale.py old $n $O/runs.jsonl 2>>$O/err.log)
    PYTHONPATH=$R timeout 50 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
  fi
done; done
echo "== small $(date -u +%T)"; PYTHONPATH=$R timeout 70 python3 .final/small_scale.py $O/small.json > $O/small.log 2>&1; tail -3 $O/small.log | cut -c1-160
echo "== cmp $(date -u +%T)"; PYTHONPATH=$R timeout 45 python3 .final/cmp.py new /tmp/new.json > $O/cmp.log 2>&1
(cd .old && PYTHONPATH=$R/.old timeout 45 python3 $R/.final/cmp.py old /tmp/old.json >> $O/cmp.log 2>&1)
python3 -c "
import json; a=json.load(open('/tmp/new.json')); b=json.load(open('/tmp/old.json'))
for k in a:
    print('overlap', k, 'tokens identical new/old:', a[k]['tokens']==b[k]['tokens'], 'schedule identical:', a[k]['schedule']==b[k]['schedule'], 'requests differing:', sum(x!=y for x,y in zip(a[k]['tokens'], b[k]['tokens'])), 'of', len(a[k]['tokens']))
print('new overlap on/off tokens identical:', a['True']['tokens']==a['False']['tokens'])
" 2>&1 | tee -a $O/cmp.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runJ.sh .final/one_scale.py .final/small_scale.py .final/cmp.py $O/; tar czf $OUT/runJ.tgz -C $O .
