#!/usr/bin/env bash
# Device call U: the paged GPU tests; PagedEngine at this commit at 32, 128 and 256 rows, each
# in its own process (one_scale.py), two rounds; then compile with a dynamic batch at 32 rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oU; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; lscpu | grep 'Model name'; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; PYTHONPATH=$R timeout 90 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
for round in 1 2; do echo "== round $round $(date -u +%T)"; for n in 32 128 256; do
  PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
done; done
echo "== compile dynamic 32 $(date -u +%T)"; PYTHONPATH=$R timeout 230 python3 .final/compile_dyn.py $O/compile.jsonl 32 > $O/compile.log 2>&1; tail -c 1500 $O/compile.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runU.sh .final/one_scale.py .final/compile_dyn.py $O/; tar czf $OUT/runU.tgz -C $O .
