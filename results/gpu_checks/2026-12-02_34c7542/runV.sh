#!/usr/bin/env bash
# Device call V: where the host runs. The GPU's PCI topology and the CPUs local to it; then
# PagedEngine at 256 rows (one_scale.py, each run its own process), three times as the OS
# places it and three times pinned to the GPU's local CPUs (taskset), alternating; then the
# compiled step with a dynamic batch at 256 then 128 rows in one process (compile_dyn.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oV; mkdir -p $O; R=$PWD
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/^0000//')
CPUS=$(cat /sys/bus/pci/devices/$BUS/local_cpulist 2>/dev/null || echo "")
{ nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; lscpu; echo "gpu bus $BUS local_cpulist $CPUS"; cat /sys/bus/pci/devices/$BUS/numa_node 2>/dev/null; nvidia-smi topo -m; cat /proc/loadavg; } > $O/machine.txt 2>&1
echo "local cpus: $CPUS"; grep -E "NUMA|Socket" $O/machine.txt
for i in 1 2 3; do
  echo "== os-placed $i $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new 256 $O/runs.jsonl 2>>$O/err.log
  if [ -n "$CPUS" ]; then echo "== pinned $i $(date -u +%T)"; PYTHONPATH=$R timeout 60 taskset -c $CPUS python3 .final/one_scale.py pinned 256 $O/runs.jsonl 2>>$O/err.log; fi
  cat /proc/loadavg
done
echo "== compile dynamic 256,128 $(date -u +%T)"; PYTHONPATH=$R timeout 330 python3 .final/compile_dyn.py $O/compile.jsonl 256,128 > $O/compile.log 2>&1; tail -c 2500 $O/compile.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runV.sh .final/one_scale.py .final/compile_dyn.py $O/; tar czf $OUT/runV.tgz -C $O .
