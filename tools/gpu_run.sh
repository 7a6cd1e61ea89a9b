#!/usr/bin/env bash
# Everything that needs a GPU, on a machine with CUDA torch but perhaps no network and no
# Jupyter: the cuda-marked tests, the notebooks under nbval-lax (and executed copies, to read
# what they show live), the SDPA/RMSNorm probe, diet stages and the benchmark, each when
# asked for, with their logs written into OUTDIR.
#
#   tools/gpu_run.sh OUTDIR [--tests] [--notebooks] [--probe] [--stages DIR] [--bench]
#                    [--bench-args "ARGS"]
#
# --stages DIR measures every DIR/<stage>/ (a `git archive COMMIT tinyllm` with COMMIT and
# WEIGHTS files beside it) with tools/diet_stages.py into OUTDIR/diet.jsonl.
# Jupyter's packages can travel as wheels in .whl/ (README, "A GPU machine without
# network"); they are installed into /tmp/site first when present. OUTDIR must be new or empty:
# nothing in it is written over.
set -uo pipefail
out=${1:?usage: tools/gpu_run.sh OUTDIR [--tests] [--notebooks] [--probe] [--stages DIR] [--bench] [--bench-args ARGS]}
shift
tests=0 notebooks=0 probe=0 stages="" bench=0 bench_args=""
while [ $# -gt 0 ]; do
    case $1 in
        --tests) tests=1 ;;
        --notebooks) notebooks=1 ;;
        --probe) probe=1 ;;
        --stages) stages=$2; shift ;;
        --bench) bench=1 ;;
        --bench-args) bench_args=$2; shift ;;
    esac
    shift
done
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
    echo "$out holds files already: give a new or empty folder (nothing is written over)" >&2
    exit 2
fi
mkdir -p "$out"
# TEARDOWN_CUPTI=1: a profiler session leaves CUPTI attached, and times that hold a launch grow
# after it (notebook 11, R.3); the tests, the notebooks and the bench all profile
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 TEARDOWN_CUPTI=1
if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
    echo "commit ${TINYLLM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    date -u +%Y-%m-%dT%H:%M:%SZ
} 2>&1 | tee "$out/machine.txt"
status=0
step() { echo "== $1 ($(date -u +%H:%M:%S))"; }
if [ $probe = 1 ]; then
    step probe
    python3 tools/gpu_probe.py "$out/probe.json" > "$out/probe.log" 2>&1 || status=1
fi
if [ -n "$stages" ]; then
    for dir in "$stages"/*/; do
        s=$(basename "$dir")
        step "diet stage $s"
        PYTHONPATH=$dir python3 tools/diet_stages.py "$s" "$(cat "$dir/COMMIT")" \
            "$(cat "$dir/WEIGHTS")" "$out/diet.jsonl" >> "$out/diet.log" 2>&1 || status=1
    done
    grep -v -i warn "$out/diet.log" | grep "^s" || true
fi
if [ $tests = 1 ]; then
    step "cuda tests"
    python3 -m pytest -q -m cuda -p no:cacheprovider tests/ > "$out/gpu_tests.log" 2>&1 || status=1
    tail -3 "$out/gpu_tests.log"
fi
if [ $notebooks = 1 ]; then
    step notebooks
    workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8 --dist loadfile")
    env -u MPLBACKEND python3 -m pytest -q --nbval-lax --nbval-current-env -p no:cacheprovider \
        $workers --nbval-cell-timeout=600 notebooks/ > "$out/notebooks.log" 2>&1 || status=1
    tail -3 "$out/notebooks.log"
    env -u MPLBACKEND python3 tools/execute_notebooks.py "$out/executed" notebooks/*.ipynb \
        > "$out/executed.log" 2>&1 || status=1
    cat "$out/executed.log"
fi
if [ $bench = 1 ]; then
    step bench
    # shellcheck disable=SC2086  # ARGS is a list of arguments
    python3 -m tinyllm.lab.bench --out "$out/bench.json" --trace-out "$out/bench_trace.json" \
        $bench_args > "$out/bench.log" 2>&1 || status=1
    tail -3 "$out/bench.log"
fi
step "done, status $status"
exit $status
