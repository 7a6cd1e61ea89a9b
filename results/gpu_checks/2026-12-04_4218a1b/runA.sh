#!/usr/bin/env bash
# Device call A (issue 27): the one-kernel sampler: its ids, its graph, the engine with it and
# with the reference's ops (sampler_probe.py); every cuda test.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runA.sh .final/sampler_probe.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 300 python3 .final/sampler_probe.py $O/sampler_probe.json > $O/probe.log 2>&1; echo rc $?; grep -v Warning $O/probe.log | tail -30
tar czf $OUT/runA.tgz -C $O .
left=$((560 - SECONDS)); echo "== cuda tests $(date -u +%T), $left s left"; PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_floor.py tests/test_gpu_paged.py tests/test_gpu.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -4 $O/gpu_tests.log; grep -E "^FAILED|Error" $O/gpu_tests.log | head
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
