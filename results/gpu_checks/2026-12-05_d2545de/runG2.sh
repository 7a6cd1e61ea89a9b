#!/usr/bin/env bash
# Device call G2 (issue 27): the bench's paged section, attention_times hiding the launch and
# run before any profiler session.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oG2; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,clocks.sm,clocks.mem --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; git status --short | head -5; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runG2.sh $O/
echo "== bench $(date -u +%T)"; PYTHONPATH=$R timeout 540 python3 -m tinyllm.lab.bench --sections paged --out $O/paged_bench.json > $O/bench.log 2>&1; echo rc $?; grep -E "^headline|^wrote" $O/bench.log | cut -c1-700
python3 -c "
import json; a = json.load(open('$O/paged_bench.json'))['paged']['attention']
for b in ('1', '8'): print(b, a[b])"
echo "== done $(date -u +%T)"; tar czf $OUT/runG2.tgz -C $O .
