#!/usr/bin/env bash
# Device call C: the bench's paged section at this commit (the step with rope_write_attend);
# the paged steps replayed alone at positions 32-75 and 960-1003; notebooks 08, 09, 10 and
# their solutions under nbval-lax (Jupyter wheels from .whl/).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oC; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cp .final/run27c.sh .final/long27.py $O/
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 240 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; grep -E "^measured|^headline|wrote" $O/bench_paged.log | cut -c1-400
tar czf $OUT/runC.tgz -C $O .
echo "== long $(date -u +%T)"; PYTHONPATH=$R timeout 200 python3 .final/long27.py $O/long27.json > $O/long27.log 2>&1; grep -v "^measured" $O/long27.log | tail -12
tar czf $OUT/runC.tgz -C $O .
echo "== notebooks $(date -u +%T)"; env -u MPLBACKEND PYTHONPATH=/tmp/site:$R timeout 150 python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider -n 6 --dist loadfile --nbval-cell-timeout=120 notebooks/08_paged_kv.ipynb notebooks/09_the_engine_around_the_graph.ipynb notebooks/10_the_engine_at_scale.ipynb notebooks/solutions/08_paged_kv_solutions.ipynb notebooks/solutions/09_the_engine_around_the_graph_solutions.ipynb notebooks/solutions/10_the_engine_at_scale_solutions.ipynb > $O/notebooks.log 2>&1; tail -3 $O/notebooks.log
echo "== done $(date -u +%T)"; tar czf $OUT/runC.tgz -C $O .
