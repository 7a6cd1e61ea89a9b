#!/usr/bin/env bash
# Device call of stop 57 with the session's last device time: probe82 alone, its JSON saved part by part.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "branch proto/fold-rows at $(cat proto82/COMMIT)"; } > $OUT/machine.txt 2>&1
cat $OUT/machine.txt; cp proto82/run82c.sh proto82/probe82.py $OUT/
PYTHONPATH=$R timeout ${T:-180} python3 proto82/probe82.py $OUT/probe82.json > $OUT/probe82.log 2>&1; echo rc $?
grep -vi warn $OUT/probe82.log | cut -c1-900 | tail -30
