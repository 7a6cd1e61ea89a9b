#!/usr/bin/env bash
# Device call A (issues 28, 27): HF continuous batching with CUDA graphs and num_blocks=256 in
# a process of its own; Inductor's settings against the paged fused step's kernel count.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
O=/tmp/oA; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_hf .whl_hf/*.whl 2>&1 | tail -2
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; PYTHONPATH=/tmp/site_hf python3 -c "import transformers; print('transformers', transformers.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt
cp .final/run39a.sh .final/probe39.py .final/hfcb39.py $O/
echo "== hf cb graphs $(date -u +%T)"; PYTHONPATH=$R:/tmp/site_hf timeout 190 python3 .final/hfcb39.py $O/hfcb_1.json 1 > $O/hfcb_1.log 2>&1; tail -c 1500 $O/hfcb_1.log
tar czf $OUT/runA.tgz -C $O .
left=$((560 - SECONDS)); echo "== inductor probe $(date -u +%T), $left s left"
PYTHONPATH=$R timeout $left python3 .final/probe39.py $O/probe39.json $((left - 140)) > $O/probe39.log 2>&1; tail -c 5000 $O/probe39.log
echo "== done $(date -u +%T)"; tar czf $OUT/runA.tgz -C $O .
