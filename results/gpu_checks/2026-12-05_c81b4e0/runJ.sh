#!/usr/bin/env bash
# Device call J (issue 27): probe76 (TEARDOWN_CUPTI set inside the process), probe75 (the op
# alone at every count of shares and warps), then probe77 (the step under the package's rule
# and under the two best rules probe75 found, each in its own process).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oJ; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runJ.sh .final/probe75.py .final/probe76.py .final/probe77.py .final/pick.py $O/
for how in unset set; do echo "== probe76 $how $(date -u +%T)"; env -u TEARDOWN_CUPTI PYTHONPATH=$R timeout 45 python3 .final/probe76.py $O/probe76_$how.json $how > $O/probe76_$how.log 2>&1; echo rc $?; grep -v Warn $O/probe76_$how.log | tail -2 | cut -c1-400; done
echo "== probe75 $(date -u +%T)"; PYTHONPATH=$R timeout 150 python3 .final/probe75.py $O/probe75.json > $O/probe75.log 2>&1; echo rc $?; tail -4 $O/probe75.log | cut -c1-900
python3 .final/pick.py $O/probe75.json > $O/rules.txt 2> $O/pick.log; cat $O/pick.log $O/rules.txt
i=0; for rule in '{}' $(cat $O/rules.txt); do i=$((i+1)); echo "== probe77 $rule $(date -u +%T)"; TORCHINDUCTOR_CACHE_DIR=/tmp/ind$i PYTHONPATH=$R timeout 110 python3 .final/probe77.py $O/probe77_$i.json "$rule" > $O/probe77_$i.log 2>&1; echo rc $?; grep "^batch" $O/probe77_$i.log; done
echo "== done $(date -u +%T)"; tar czf $OUT/runJ.tgz -C $O .
