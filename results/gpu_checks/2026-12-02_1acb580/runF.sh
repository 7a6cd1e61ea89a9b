#!/usr/bin/env bash
# Device call F: notebook 08 with its solutions under nbval-lax after its last edit.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oF; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; } > $O/machine.txt 2>&1
env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 200 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 2 --dist loadfile --nbval-cell-timeout=150 notebooks/08_paged_kv.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb > $O/notebooks.log 2>&1; echo rc=$?; tail -3 $O/notebooks.log
cp .final/runF.sh $O/; tar czf $OUT/runF.tgz -C $O .
