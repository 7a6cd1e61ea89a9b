#!/usr/bin/env bash
# Device call R: the paged GPU tests; then PagedEngine at this commit (new: min_admit default;
# new1: min_admit=1) and at 29739dc (prev, .prev/), each in its own process at 32, 128 and 256
# rows, two rounds; the host's sections at 256 rows (secprof.py).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oR; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) prev $(cat .prev/COMMIT)"; nproc; lscpu | grep 'Model name'; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; PYTHONPATH=$R timeout 170 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
for round in 1 2; do echo "== round $round $(date -u +%T)"; for n in 32 128 256; do
  for which in new new1 prev; do
    if [ $which = prev ]; then (cd .prev && PYTHONPATH=$R/.prev timeout 50 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
    else PYTHONPATH=$R timeout 50 python3 .final/one_scale.py $which $n $O/runs.jsonl 2>>$O/err.log; fi
  done
done; done
echo "== secprof 256 $(date -u +%T)"; PYTHONPATH=$R timeout 60 python3 .final/secprof.py 256 $O/secprof_256.json > $O/secprof_256.log 2>&1; head -8 $O/secprof_256.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runR.sh .final/one_scale.py .final/secprof.py $O/; tar czf $OUT/runR.tgz -C $O .
