#!/usr/bin/env bash
# Device call B (issue 27): call A again after the split-K op launches with PDL too, and after the projection kernel takes a tile of rows with
# tl.dot and the fused kernel reads RoPE's tables; batches to 32; the step against position;
# the bench's paged section (results/h200_paged.json); the paged cuda tests.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
O=/tmp/oB; mkdir -p $O; R=$PWD
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run41b.sh .final/probe41.py $O/
echo "== probe $(date -u +%T)"; PYTHONPATH=$R timeout 260 python3 .final/probe41.py $O/probe41.json 200 > $O/probe41.log 2>&1; echo rc $?; tail -c 4000 $O/probe41.log
tar czf $OUT/runB.tgz -C $O .
echo "== bench paged $(date -u +%T)"; PYTHONPATH=$R timeout 240 python3 -m tinyllm.lab.bench --sections paged --out $O/h200_paged.json > $O/bench_paged.log 2>&1; echo rc $?; grep -E "^headline|wrote" $O/bench_paged.log | cut -c1-600; tail -3 $O/bench_paged.log | cut -c1-300
tar czf $OUT/runB.tgz -C $O .
left=$((585 - SECONDS)); echo "== paged cuda tests $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 -m pytest -q -m cuda -p no:cacheprovider -p no:nbval -rs --durations=5 tests/test_gpu_paged.py "tests/test_gpu_fused.py::test_the_compiled_paged_engine_replays_what_it_runs_eagerly" > $O/gpu_tests.log 2>&1; tail -8 $O/gpu_tests.log
echo "== done $(date -u +%T)"; tar czf $OUT/runB.tgz -C $O .
