#!/usr/bin/env bash
# Device call Q: where the paged engine's host time per step goes at 256, 128 and 32 rows (secprof.py),
# and the engine at this commit through lab.engine_time.scale at 32, 128 and 256 rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oQ; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; lscpu | grep 'Model name'; } > $O/machine.txt 2>&1
for n in 256 128 32; do echo "== secprof $n $(date -u +%T)"; PYTHONPATH=$R timeout 90 python3 .final/secprof.py $n $O/secprof_$n.json > $O/secprof_$n.log 2>&1; head -30 $O/secprof_$n.log; done
for n in 32 128 256; do echo "== scale $n $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log; done
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runQ.sh .final/secprof.py $O/; tar czf $OUT/runQ.tgz -C $O .
