#!/usr/bin/env bash
# Device call J (issue 27, stop 45): the op alone through its custom op against its launcher;
# the barrier's waits as atomic reads against volatile loads (probe62.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oJ; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run62j.sh .final/probe62.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 240 python3 .final/probe62.py $O/probe62.json > $O/probe62.log 2>&1; echo rc $?; grep -E "^op|^barriers|^done|Error" $O/probe62.log | cut -c1-400
echo "== done $(date -u +%T)"; tar czf $OUT/runJ.tgz -C $O .
