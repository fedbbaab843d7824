#!/usr/bin/env bash
# Second GPU check: the trainer-step benchmark alone, more steps (2 warm-up + 8 timed per case), on a machine already
# warmed by the install and the model build; every `ours` case, the 4-agent memory case included.
set -uo pipefail
R=$PWD
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
stamp() { echo "[gpu] +$(( $(date +%s) - T0 )) s: $*" | tee -a $OUT/info.txt; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -V; nproc; } > $OUT/info.txt 2>&1
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/.whl/*.whl \
  >> $OUT/info.txt 2>&1 || { stamp "pip install failed"; exit 3; }
export PYTHONPATH=/tmp/site
stamp "installed"
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
stamp "model built"
cd /tmp
timeout ${TS:-380} $PY -m llm_marl_benchmarks.trainer_step --only ours --groups 4 --device cuda --model $M \
  --steps 8 --warmup 2 --json $OUT/trainer_step_cuda.json > $OUT/trainer_step.log 2>&1; stamp "trainer_step rc=$?"
tail -40 $OUT/trainer_step.log
