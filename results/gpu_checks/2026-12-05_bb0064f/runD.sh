#!/usr/bin/env bash
# Device call D (issue 27, prepared in stop 51 with no GPU): the attention reading before PDL's
# wait and triggering first (variants8), against the same reading with the trigger after the
# wait and the package: the node floor, a chain of calls, the op alone read in nodes of the
# same run, the package's op timed two ways, the step (probe73.py); GPU id and clocks before and after.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oD; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total,uuid,serial,pci.bus_id,clocks.max.sm,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv; hostname; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runD.sh .final/probe73.py .final/variants8.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 510 python3 .final/probe73.py $O/probe73.json 300 > $O/probe73.log 2>&1; echo rc $?; grep -E "^floor|^chain|^method|^placement|^batch|^step|^sweep|^exact|^tokens|^done|Error" $O/probe73.log | cut -c1-600
nvidia-smi --query-gpu=uuid,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $O/machine.txt 2>&1
echo "== done $(date -u +%T)"; tar czf $OUT/runD.tgz -C $O .
