#!/usr/bin/env bash
# Device call C (issue 27): the bench's engine_scale section with the one-kernel sampler, each run in its own process.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; lscpu | grep -E 'Model name|NUMA'; cat /proc/loadavg; } > $O/machine.txt 2>&1
cp .final/runC.sh $O/; tar czf $OUT/runC.tgz -C $O .
echo "== bench engine_scale $(date -u +%T)"
TINYLLM_COMMIT=$(cat .final/COMMIT) TINYLLM_DIRTY=0 PYTHONPATH=$R timeout 560 python3 -m tinyllm.lab.bench --sections engine_scale --out $O/engine_scale_bench.json > $O/bench.log 2>&1; echo rc=$?
grep -o '"n_rows": [0-9]*\|"tok_s": [0-9.]*\|"host_us_per_step": [0-9.]*\|"compile": [a-z]*\|"min_admit": [0-9]*\|"compiles": [0-9]*' $O/bench.log | paste -sd' ' | sed 's/"n_rows"/\n"n_rows"/g'
tail -5 $O/bench.log
echo "== done $(date -u +%T)"; cp .final/runC.sh $O/; tar czf $OUT/runC.tgz -C $O .
