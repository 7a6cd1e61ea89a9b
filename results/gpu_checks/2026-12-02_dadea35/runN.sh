#!/usr/bin/env bash
# Device call N: the pinned uploads (this commit, new) against 602ff2d (prev, .prev/): the paged
# GPU tests, then each engine in its own process at 32, 128 and 256 rows, one after the other,
# two rounds; the host's profile at 256 rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oN; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) prev $(cat .prev/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== gpu paged tests $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/test_gpu_paged.py > $O/gpu_paged_tests.log 2>&1; tail -1 $O/gpu_paged_tests.log
for round in 1 2; do echo "== round $round $(date -u +%T)"; for n in 32 128 256; do
  if [ $round = 1 ]; then
    PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
    (cd .prev && PYTHONPATH=$R/.prev timeout 60 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
  else
    (cd .prev && PYTHONPATH=$R/.prev timeout 60 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
    PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
  fi
done; done
echo "== hostprof 256 $(date -u +%T)"; PYTHONPATH=$R timeout 120 python3 .final/hostprof.py 256 $O/hostprof_256 > $O/hostprof_256.log 2>&1; head -12 $O/hostprof_256.log
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runN.sh .final/one_scale.py .final/hostprof.py $O/; tar czf $OUT/runN.tgz -C $O .
