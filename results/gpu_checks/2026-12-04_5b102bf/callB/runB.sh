#!/usr/bin/env bash
# Device call B (issue 27): the sampler kernel's branches against 4218a1b's (sampler_variants.py);
# the cuda tests of the kernels and the paged engine.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oB; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/runB.sh .final/sampler_variants.py .final/kernels_4218a1b.py $O/
echo "== variants $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 .final/sampler_variants.py $O/sampler_variants.json > $O/variants.log 2>&1; echo rc $?; grep -v Warn $O/variants.log | tail -16
tar czf $OUT/runB.tgz -C $O .
echo "== cuda tests $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs tests/test_gpu_paged.py > $O/gpu_tests.log 2>&1; tail -2 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runB.tgz -C $O .
