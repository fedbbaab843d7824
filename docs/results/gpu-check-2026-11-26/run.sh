#!/usr/bin/env bash
# GPU check of the project's CUDA path (device tool): install the wheels, build a random-weight model of
# SmolLM2-135M's shape with its real tokenizer, then `llm-marl train` (writing, then coding) and the trainer-step
# benchmark on cuda. Every stage is time-limited; logs go to $OUT.
set -uo pipefail
R=$PWD
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true
T0=$(date +%s)
stamp() { echo "[gpu] +$(( $(date +%s) - T0 )) s: $*" | tee -a $OUT/info.txt; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -V; nproc; } > $OUT/info.txt 2>&1
if [ -z "${LOCAL:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/.whl/*.whl \
    >> $OUT/info.txt 2>&1 || { stamp "pip install failed"; exit 3; }
  export PYTHONPATH=/tmp/site
fi
$PY -c "import torch, transformers, peft, llm_marl_envs, llm_marl_trainers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'peft', peft.__version__)" >> $OUT/info.txt 2>&1
stamp "installed"
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
stamp "model built"
cd /tmp
timeout ${TW:-150} $PY -m llm_marl_benchmarks.cli train --config $R/.gpu/writing.yaml --model $M --output /tmp/run-w \
  > $OUT/train_writing.log 2>&1; stamp "writing train rc=$?"
timeout ${TR:-60} $PY -m llm_marl_benchmarks.cli train --resume /tmp/run-w --steps 3 >> $OUT/train_writing.log 2>&1
stamp "writing resume rc=$?"
cp /tmp/run-w/metrics.jsonl $OUT/metrics_writing.jsonl 2>/dev/null
timeout ${TC:-100} $PY -m llm_marl_benchmarks.cli train --config $R/.gpu/coding.yaml --model $M --output /tmp/run-c \
  > $OUT/train_coding.log 2>&1; stamp "coding train rc=$?"
cp /tmp/run-c/metrics.jsonl $OUT/metrics_coding.jsonl 2>/dev/null
timeout ${TS:-170} $PY -m llm_marl_benchmarks.trainer_step --only ours floor --groups 4 --device ${DEV:-cuda} --model $M \
  --steps 3 --warmup 1 --json $OUT/trainer_step_cuda.json > $OUT/trainer_step.log 2>&1; stamp "trainer_step rc=$?"
