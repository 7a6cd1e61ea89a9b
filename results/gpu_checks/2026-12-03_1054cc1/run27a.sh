#!/usr/bin/env bash
# Device call A (issue 27): every cuda test with rope_write_attend in the paged step; the probe.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oA; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run27a.sh .final/probe27.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 300 python3 .final/probe27.py $O/probe27.json > $O/probe27.log 2>&1; tail -c 5000 $O/probe27.log
tar czf $OUT/runA.tgz -C $O .
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 270 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu.py tests/test_gpu_paged.py tests/test_gpu_fused.py > $O/gpu_tests.log 2>&1; tail -25 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
