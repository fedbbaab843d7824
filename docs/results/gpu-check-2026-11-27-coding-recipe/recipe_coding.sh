#!/usr/bin/env bash
# GPU check 5: reading each prompt once vs prefilling every row at the coding-2 recipe's settings (4 turns, one
# branching turn, G = 4, 2 trees, 160 tokens; TF-IDF similarity, the `local` executor), random weights of
# SmolLM2-135M's shape: the comparison GPU check 4 ran out of device time for.
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
$PY -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" >> $OUT/info.txt 2>&1
stamp "installed"
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
stamp "model built"
cd /tmp
timeout ${TS:-400} $PY -m llm_marl_benchmarks.trainer_step --only floor --groups 4 --device cuda --model $M \
  --steps 2 --warmup 1 --recipe $R/.gpu/coding-recipe.yaml --json $OUT/trainer_step_coding_recipe_cuda.json \
  > $OUT/trainer_step.log 2>&1; stamp "trainer_step rc=$?"
tail -30 $OUT/trainer_step.log
