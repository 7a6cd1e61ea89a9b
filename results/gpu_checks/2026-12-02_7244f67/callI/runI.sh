#!/usr/bin/env bash
# Device call I: notebook 09's recordings re-taken on PagedEngine.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TINYLLM_COMMIT=$(cat .final/COMMIT)
O=/tmp/oI; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== seeded $(date -u +%T)"; PYTHONPATH=$R timeout 80 python3 results/probes/seeded_share.py $O/h200_seeded_share.json > $O/seeded.log 2>&1; tail -2 $O/seeded.log
echo "== busy $(date -u +%T)"; PYTHONPATH=$R timeout 120 python3 results/probes/engine_busy_events.py $O/h200_busy_events.json > $O/busy.log 2>&1; tail -4 $O/busy.log
echo "== policy $(date -u +%T)"; PYTHONPATH=$R timeout 120 python3 -m tinyllm.lab.capture_policy $O/h200_capture_policy.json > $O/policy.log 2>&1; tail -3 $O/policy.log
echo "== bench $(date -u +%T)"; PYTHONPATH=$R timeout 240 python3 -m tinyllm.lab.bench --sections engine,engine_paged --out $O/h200_engine.json > $O/bench.log 2>&1; tail -3 $O/bench.log
echo "== done $(date -u +%T)"; cp .final/runI.sh $O/; tar czf $OUT/runI.tgz -C $O .
