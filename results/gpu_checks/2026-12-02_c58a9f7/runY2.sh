#!/usr/bin/env bash
# Device call Y: HF continuous batching with CUDA graphs and async batching, then also
# default_compile_level=1, each in its own process (hf_cb_one.py; in one process the second
# manager ran out of memory).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
O=/tmp/oY; mkdir -p $O; R=$PWD
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site_hf .whl_hf/*.whl
for i in 0; do echo "== config $i $(date -u +%T)"; PYTHONPATH=$R:/tmp/site_hf timeout 150 python3 .final/hf_cb_one.py $O/hf_cb_$i.json $i > $O/hf_cb_$i.log 2>&1; tail -c 600 $O/hf_cb_$i.log; done
cp .final/runY.sh .final/hf_cb_one.py $O/; tar czf $OUT/runY.tgz -C $O .
