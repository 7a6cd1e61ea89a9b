#!/usr/bin/env bash
# Device call E (2026-12-03, third session): notebooks 07, 09 and 10 with their solutions under
# nbval-lax at the stop's commit (Jupyter's wheels from .whl/, transformers' from .whl_hf/).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl_hf/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
O=/tmp/oE; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run39e.sh $O/
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 270 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=240 notebooks/07_graphs_and_torch_compile.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/solutions/07_graphs_and_torch_compile_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb > $O/notebooks.log 2>&1; tail -5 $O/notebooks.log
echo "== done $(date -u +%T)"; tar czf $OUT/runE.tgz -C $O .
