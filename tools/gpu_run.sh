#!/usr/bin/env bash
# Everything that needs a GPU, in one go, on a machine with CUDA torch but perhaps no
# network and no Jupyter: the cuda-marked tests, the benchmark (optional) and every
# notebook under nbval-lax, with their logs written into OUTDIR.
#
#   tools/gpu_run.sh OUTDIR [--bench] [--tests PATTERN]
#
# Jupyter's packages can travel as wheels in .whl/ (see README, "A GPU machine without
# network"); they are installed into /tmp/site first when present.
set -uo pipefail
out=${1:?usage: tools/gpu_run.sh OUTDIR [--bench] [--tests PATTERN]}
shift
bench=0
tests="tests/test_gpu.py tests/test_gpu_fused.py"
while [ $# -gt 0 ]; do
    case $1 in
        --bench) bench=1 ;;
        --tests) tests=$2; shift ;;
    esac
    shift
done
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
    git rev-parse --short HEAD 2>/dev/null || echo "commit: ${TINYLLM_COMMIT:-unknown}"
    date -u +%Y-%m-%dT%H:%M:%SZ
} 2>&1 | tee "$out/machine.txt"
status=0
if [ -n "$tests" ]; then
    python3 -m pytest -q -m cuda -p no:cacheprovider $tests 2>&1 | grep -v "^DEBUG" > "$out/gpu_tests.log" || status=1
    tail -5 "$out/gpu_tests.log"
fi
if [ $bench = 1 ]; then
    python3 -m tinyllm.lab.bench --out "$out/bench.json" --trace-out "$out/bench_trace.json" \
        > "$out/bench.log" 2>&1 || status=1
    tail -3 "$out/bench.log"
fi
start=$(date +%s)
workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8 --dist loadfile")
env -u MPLBACKEND python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider \
    $workers --nbval-cell-timeout=600 notebooks/ > "$out/notebooks.log" 2>&1 || status=1
echo "nbval-lax, every notebook: $(( $(date +%s) - start )) s"; tail -3 "$out/notebooks.log"
# the same notebooks once more, keeping what they show live on this GPU
env -u MPLBACKEND python3 tools/execute_notebooks.py "$out/executed" notebooks/*.ipynb \
    > "$out/executed.log" 2>&1 || status=1
cat "$out/executed.log"
exit $status
