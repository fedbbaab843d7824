#!/usr/bin/env bash
# GPU check 7 (issue 44's last target): the graph decoder's step compiled by torch.compile (Inductor) before it is
# captured, against the uncompiled captured step and the eager decode, on one device machine. From the repository
# root, with the wheels the machine lacks in .whl/ and make_model.py (../gpu-2026-11-28/make_model.py, unchanged),
# writing-2.yaml and the default model's config
# and tokenizer (.gpu/smollm2-config/) in .gpu/. Each part has its own time limit; the figures land in $OUT as they
# come.
set -uo pipefail
R=$PWD
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
T0=$(date +%s)
stamp() { echo "[gpu] +$(( $(date +%s) - T0 )) s: $*" | tee -a $OUT/info.txt; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -V; nproc; } > $OUT/info.txt 2>&1
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/.whl/*.whl \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (wheels) failed"; exit 3; }
$PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade --target /tmp/site $R \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (project) failed"; exit 3; }
export PYTHONPATH=/tmp/site
$PY -c "import torch, transformers, peft, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'triton', triton.__version__)" >> $OUT/info.txt 2>&1
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
sed "s#/tmp/smollm2-random#$M#" $R/.gpu/writing-2.yaml > /tmp/writing-2.yaml
stamp "installed, model built"
cd /tmp
# 1. The compiled step on the device: its logits against the model's forward (bf16), and its time a call at 16 rows
#    beside the uncompiled captured step and the eager decode.
[ "${SKIP_CHECK:-0}" = 1 ] || timeout ${T_CHECK:-170} $PY -m llm_marl_benchmarks.graph_decode --model $M --check --check-dtypes bfloat16 --compile \
  --rows 16 --repeats 2 --json $OUT/graph_decode_cuda.json > $OUT/graph_decode.log 2>&1; stamp "graph_decode rc=$?"
grep "^\[graph_decode\]" $OUT/graph_decode.log | tail -4
# 2. The trainer's step at the writing-2 recipe: compiled, graphs and eager in one run.
timeout ${T_STEP:-400} $PY -m llm_marl_benchmarks.trainer_step --only --device cuda --model $M --steps ${STEPS:-3} \
  --warmup ${WARMUP:-1} --recipe /tmp/writing-2.yaml --recipe-compare compiled --json $OUT/trainer_step_writing_cuda.json \
  > $OUT/trainer_step_writing.log 2>&1; stamp "trainer_step rc=$?"
grep "^\[" $OUT/trainer_step_writing.log | tail -4
