#!/usr/bin/env bash
# Device call H: every cuda test (Jupyter wheels from .whl/); round 2 of new/prev at 32, 128, 256 rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oH; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT) prev $(cat .prev/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== gpu tests $(date -u +%T)"; PYTHONPATH=/tmp/site:$R timeout 290 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/ > $O/gpu_tests.log 2>&1; tail -2 $O/gpu_tests.log
echo "== scale round 2 $(date -u +%T)"
for n in 32 128 256; do
  (cd .prev && PYTHONPATH=$R/.prev timeout 60 python3 $R/.final/one_scale.py prev $n $O/runs.jsonl 2>>$O/err.log)
  PYTHONPATH=$R timeout 60 python3 .final/one_scale.py new $n $O/runs.jsonl 2>>$O/err.log
done
echo "== done $(date -u +%T)"; tail -3 $O/err.log; cp .final/runH.sh $O/; tar czf $OUT/runH.tgz -C $O .
