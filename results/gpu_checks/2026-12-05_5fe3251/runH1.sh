#!/usr/bin/env bash
# Device call H1 (issue 27): probe74 twice, then the bench's paged section again, in two processes: torch's default, then with
# TEARDOWN_CUPTI=1 (Kineto tears CUPTI down when a profiler session ends: pytorch#144455).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oH1; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,clocks.sm,clocks.mem --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; git status --short | head -5; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runH1.sh .final/probe74.py $O/
echo "== probe74 $(date -u +%T)"; PYTHONPATH=$R timeout 140 python3 .final/probe74.py $O/probe74.json > $O/probe74.log 2>&1; echo rc $?; grep -v Warning $O/probe74.log | cut -c1-1500 | tail -8
echo "== probe74, TEARDOWN_CUPTI=1 $(date -u +%T)"; TEARDOWN_CUPTI=1 PYTHONPATH=$R timeout 140 python3 .final/probe74.py $O/probe74_teardown.json > $O/probe74_teardown.log 2>&1; echo rc $?; grep -v Warning $O/probe74_teardown.log | cut -c1-1500 | tail -8
echo "== bench $(date -u +%T)"; PYTHONPATH=$R timeout 280 python3 -m tinyllm.lab.bench --sections paged --out $O/paged_bench.json > $O/bench.log 2>&1; echo rc $?; grep -E "^headline|^wrote" $O/bench.log | cut -c1-700
python3 -c "
import json; a = json.load(open('$O/paged_bench.json'))['paged']
for b in ('1', '8'): print(b, a['attention'][b])
print(a['sweep']['paged_us'])"
echo "== done $(date -u +%T)"; tar czf $OUT/runH1.tgz -C $O .
