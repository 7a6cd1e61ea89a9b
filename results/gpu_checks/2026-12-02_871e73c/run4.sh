#!/usr/bin/env bash
# Interleaved: for each of two rounds and each size, the new PagedEngine, the one before this
# change (.prev) and the engine before PagedEngine (.old), each in its own process, one after
# the other, so that a slow minute of the host falls on all three.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/o4; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch; print('torch', torch.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) prev $(cat .prev/COMMIT) old $(cat .old/COMMIT)"; } > $O/machine.txt 2>&1
for round in 1 2; do for n in 32 128 256; do
  PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
  (cd .prev && PYTHONPATH=$R/.prev timeout 60 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
  (cd .old && PYTHONPATH=$R/.old timeout 60 python3 $R/.final/one_scale.py old $n $O/runs.jsonl 2>>$O/err.log)
done; done
date -u +%T; tail -3 $O/err.log; tar czf $OUT/run4.tgz -C $O .
