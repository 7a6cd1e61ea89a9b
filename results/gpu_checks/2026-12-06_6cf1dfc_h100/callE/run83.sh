#!/usr/bin/env bash
# probe84: the fused attention with every K/V head of a row in one program, against the package.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
O=/tmp/oE; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "main at $(cat proto83/COMMIT) with proto83/ (untracked)"; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp proto83/run83.sh proto83/probe84.py proto83/variant83.py $O/
echo "== probe84 $(date -u +%T)"
PYTHONPATH=$R timeout ${T:-480} python3 proto83/probe84.py $O/probe84.json > $O/probe84.log 2>&1; echo rc $?
grep -vi warn $O/probe84.log | cut -c1-600 | tail -40
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
