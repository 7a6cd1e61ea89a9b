#!/usr/bin/env bash
# Device call of stop 59 (issue 27): probe86 (the step with fewer splits, as a second graph for
# short rows would run it) on main, on whatever GPU comes.
set -uo pipefail
export TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_AUTOGRAD_CACHE=0 TORCHINDUCTOR_CACHE_DIR=/tmp/ind86 PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "main at $(cat proto86/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp proto86/run.sh proto86/probe86.py $O/
echo "== probe86 $(date -u +%T)"
PYTHONPATH=$R timeout 400 python3 proto86/probe86.py $O/probe86.json > $O/probe86.log 2>&1; echo rc $?
grep -vi warn $O/probe86.log | cut -c1-400 | tail -30
echo "== done $(date -u +%T)"; tar czf $OUT/run.tgz -C $O .
