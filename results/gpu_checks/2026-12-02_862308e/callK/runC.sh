#!/usr/bin/env bash
# Device call C: every cuda test, then every notebook under nbval-lax. Logs into $OUT/runC.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
S=/tmp/site
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== gpu tests $(date -u +%T)"; PYTHONPATH=$S:$PWD timeout 290 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/ > $O/gpu_tests.log 2>&1; tail -2 $O/gpu_tests.log
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=$S:$PWD timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=180 notebooks/ > $O/notebooks.log 2>&1; tail -2 $O/notebooks.log
echo "== done $(date -u +%T)"; cp .final/runC.sh $O/; tar czf $OUT/runC.tgz -C $O .
