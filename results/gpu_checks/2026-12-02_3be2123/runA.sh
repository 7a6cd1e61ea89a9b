#!/usr/bin/env bash
# Device call A: where the paged engine's host time goes at 32 and 256 rows (prof_host.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; lscpu | grep -E 'Model name|MHz|NUMA'; cat /proc/loadavg; } > $O/machine.txt 2>&1
for m in "sections 32" "sections 256" "cprofile 256"; do echo "== $m $(date -u +%T)"; PYTHONPATH=$R timeout 90 python3 .final/prof_host.py $m > $O/prof_${m// /_}.log 2>&1; head -c 3000 $O/prof_${m// /_}.log; done
for i in 1 2; do for m in plain nogc; do echo "== $m 256 #$i $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/prof_host.py $m 256 2>>$O/err.log | tee -a $O/ab.jsonl; done
  echo "== pinned core 3 #$i"; PYTHONPATH=$R timeout 60 taskset -c 3 python3 .final/prof_host.py plain 256 2>>$O/err.log | sed 's/"plain"/"core3"/' | tee -a $O/ab.jsonl; cat /proc/loadavg; done
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runA.sh .final/prof_host.py $O/; tar czf $OUT/runA.tgz -C $O .
