#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/op; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
timeout 280 python3 -m pytest -q -x -m cuda tests/test_gpu_paged.py -p no:cacheprovider > $O/gpu_paged.log 2>&1; tail -3 $O/gpu_paged.log
for n in 256 128 32; do PYTHONPATH=$PWD timeout 150 python3 .final/probe.py $n >> $O/probe.txt 2>>$O/err.log; done
tail -5 $O/err.log; cat $O/probe.txt | head -150; tar czf $OUT/probe.tgz -C $O .
