#!/usr/bin/env bash
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oG; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== guards $(date -u +%T)"; PYTHONPATH=$PWD timeout 90 python3 .final/guards.py > $O/guards.json 2>$O/guards.err; cat $O/guards.json | head -40; tail -3 $O/guards.err
echo "== gpu paged + kernel tests $(date -u +%T)"; timeout 120 python3 -m pytest -q -m cuda -p no:cacheprovider tests/test_gpu_paged.py tests/test_kernels.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
echo "== done $(date -u +%T)"; cp .final/guards.py .final/runG.sh $O/; tar czf $OUT/runG.tgz -C $O .
