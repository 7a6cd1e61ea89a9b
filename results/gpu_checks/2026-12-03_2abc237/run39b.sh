#!/usr/bin/env bash
# Device call B (issue 28): the bench's hf and sizes sections, the recording results/h200_hf.json.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
O=/tmp/oB; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_hf .whl_hf/*.whl 2>&1 | tail -2
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; PYTHONPATH=/tmp/site_hf python3 -c "import transformers; print('transformers', transformers.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
cat $O/machine.txt; cp .final/run39b.sh $O/
echo "== bench hf,sizes $(date -u +%T)"
TINYLLM_COMMIT=$(cat .final/COMMIT) PYTHONPATH=$R:/tmp/site_hf timeout 570 python3 -m tinyllm.lab.bench --sections hf,sizes --out $O/h200_hf.json > $O/bench_hf.log 2>&1; echo "rc $?"
tail -c 6000 $O/bench_hf.log
echo "== done $(date -u +%T)"; tar czf $OUT/runB.tgz -C $O .
