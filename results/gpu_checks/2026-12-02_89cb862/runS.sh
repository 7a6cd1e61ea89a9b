#!/usr/bin/env bash
# Device call S: PagedEngine(compile=True) at 256, 128 and 32 rows in one process, then compile=False.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oS; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== compile $(date -u +%T)"; PYTHONPATH=$R timeout 540 python3 .final/compile_scale.py $O/compile.jsonl 256,128,32 > $O/compile.log 2>&1; cut -c1-300 $O/compile.log | grep -v Warn | tail -8
echo "== done $(date -u +%T)"; cp .final/runS.sh .final/compile_scale.py $O/; tar czf $OUT/runS.tgz -C $O .
