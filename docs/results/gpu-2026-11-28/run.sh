#!/usr/bin/env bash
# GPU check 6: the graph decoder (issue 44) on one device machine. From the repository root, with the wheels the
# machine lacks in .whl/ and the default model's config, tokenizer and make_model.py in .gpu/.
set -uo pipefail
R=$PWD
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
stamp() { echo "[gpu] +$(( $(date +%s) - T0 )) s: $*" | tee -a $OUT/info.txt; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv; $PY -V; nproc; } > $OUT/info.txt 2>&1
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/.whl/*.whl \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (wheels) failed"; exit 3; }
$PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --target /tmp/site $R \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (project) failed"; exit 3; }
export PYTHONPATH=/tmp/site
$PY -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" >> $OUT/info.txt 2>&1
stamp "installed"
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
sed "s#/tmp/smollm2-random#$M#" $R/.gpu/writing-2.yaml > /tmp/writing-2.yaml
sed "s#/tmp/smollm2-random#$M#" $R/.gpu/coding-2.yaml > /tmp/coding-2.yaml
stamp "model built"
cd /tmp
timeout ${T_CHECK:-150} $PY -m llm_marl_benchmarks.graph_decode --model $M --check --rows 8 32 64 --repeats 2 \
  --json $OUT/graph_decode_cuda.json > $OUT/graph_decode.log 2>&1; stamp "graph_decode rc=$?"
tail -5 $OUT/graph_decode.log
timeout ${T_STEP:-330} $PY -m llm_marl_benchmarks.trainer_step --only --device cuda --model $M --steps ${STEPS:-2} --warmup 1 \
  --recipe /tmp/writing-2.yaml /tmp/coding-2.yaml --recipe-compare graphs --json $OUT/trainer_step_recipes_cuda.json \
  > $OUT/trainer_step.log 2>&1; stamp "trainer_step rc=$?"
grep "^\[" $OUT/trainer_step.log | tail -6
S0=$(date +%s)
timeout ${T_STUDY:-120} $PY -m llm_marl_benchmarks.study --preset results --envs writing coding --sizes 2 --pairs 2 --conditions untrained single single_oneshot \
  --model $M --similarity tfidf --executor local --no-report --out /tmp/study --json $OUT/study_cuda.json \
  > $OUT/study.log 2>&1; rc=$?; stamp "study rc=$rc in $(( $(date +%s) - S0 )) s"
ls -la /tmp/study >> $OUT/info.txt 2>&1; cp /tmp/study/*.jsonl $OUT/ 2>/dev/null
tail -4 $OUT/study.log
