#!/usr/bin/env bash
# Device call X: where graphs stop mattering (size_sweep.py: 3 M to 1.2 B parameters, random
# weights); Hugging Face transformers as a peer (hf_probe.py; wheels from .whl_hf/).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
O=/tmp/oX; mkdir -p $O; R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_hf .whl_hf/*.whl
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; PYTHONPATH=/tmp/site_hf python3 -c "import transformers; print('transformers', transformers.__version__)"; date -u +%Y-%m-%dT%H:%M:%SZ; echo "commit $(cat .final/COMMIT)"; nproc; } > $O/machine.txt 2>&1
echo "== size sweep $(date -u +%T)"; PYTHONPATH=$R timeout 120 python3 .final/size_sweep.py $O/size_sweep.json > $O/size_sweep.log 2>&1; tail -c 1800 $O/size_sweep.log
cp .final/runX.sh .final/size_sweep.py .final/hf_probe.py $O/; tar czf $OUT/runX.tgz -C $O .
left=$((505 - SECONDS)); echo "== hf probe $(date -u +%T), $left s left"; PYTHONPATH=$R:/tmp/site_hf timeout $left python3 .final/hf_probe.py $O/hf_probe.json > $O/hf_probe.log 2>&1; tail -c 3000 $O/hf_probe.log
echo "== done $(date -u +%T)"; tar czf $OUT/runX.tgz -C $O .
