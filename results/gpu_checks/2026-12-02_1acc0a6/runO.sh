#!/usr/bin/env bash
# Device call O: the floor of a graph node (lab.floor), every cuda test, every notebook under nbval-lax.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TINYLLM_COMMIT=$(cat .final/COMMIT) TINYLLM_DIRTY=0
O=/tmp/oO; mkdir -p $O; S=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $S .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
echo "== floor $(date -u +%T)"; PYTHONPATH=$PWD timeout 60 python3 -m tinyllm.lab.floor $O/h200_floor.json > $O/floor.log 2>&1; tail -2 $O/floor.log; python3 -c "import json; d=json.load(open('$O/h200_floor.json')); print({k: (v['us_per_node'], v['fixed_us'], v['counted']) for k, v in d.items() if isinstance(v, dict) and 'us_per_node' in v})"
echo "== gpu tests $(date -u +%T)"; PYTHONPATH=$S:$PWD timeout 330 python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval tests/ > $O/gpu_tests.log 2>&1; tail -2 $O/gpu_tests.log
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=$S:$PWD timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=180 notebooks/ > $O/notebooks.log 2>&1; tail -2 $O/notebooks.log
echo "== done $(date -u +%T)"; cp .final/runO.sh $O/; tar czf $OUT/runO.tgz -C $O .
