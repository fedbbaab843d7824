#!/usr/bin/env bash
# GPU check 6, second call: the writing-2 recipe's step over more steps (the first call's two steady steps were 12.3
# and 5.0 s), and the study's throughput at the results preset's settings on the GPU (the first call's study stopped
# in its planning: fixed since). Same wheels and files as run.sh.
set -uo pipefail
R=$PWD
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
stamp() { echo "[gpu] +$(( $(date +%s) - T0 )) s: $*" | tee -a $OUT/info.txt; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; $PY -V; nproc; } > $OUT/info.txt 2>&1
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $R/.whl/*.whl \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (wheels) failed"; exit 3; }
$PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade --target /tmp/site $R \
  >> $OUT/info.txt 2>&1 || { stamp "pip install (project) failed"; exit 3; }
export PYTHONPATH=/tmp/site
M=/tmp/smollm2-random
$PY $R/.gpu/make_model.py $M >> $OUT/info.txt 2>&1 || { stamp "make_model failed"; exit 4; }
sed "s#/tmp/smollm2-random#$M#" $R/.gpu/writing-2.yaml > /tmp/writing-2.yaml
stamp "installed, model built"
cd /tmp
S0=$(date +%s)
timeout ${T_STUDY:-130} $PY -m llm_marl_benchmarks.study --preset results --envs writing coding --sizes 2 --pairs 3 \
  --conditions untrained single single_oneshot --model $M --similarity tfidf --executor local --no-report \
  --out /tmp/study --json $OUT/study_cuda.json > $OUT/study.log 2>&1; rc=$?
stamp "study rc=$rc in $(( $(date +%s) - S0 )) s, $(cat /tmp/study/episodes.jsonl 2>/dev/null | wc -l) episodes logged"
cp /tmp/study/episodes.jsonl $OUT/study_episodes.jsonl 2>/dev/null
tail -3 $OUT/study.log
timeout ${T_STEP:-170} $PY -m llm_marl_benchmarks.trainer_step --only --device cuda --model $M --steps 3 --warmup 1 \
  --recipe /tmp/writing-2.yaml --recipe-compare graphs --json $OUT/trainer_step_writing_cuda.json \
  > $OUT/trainer_step_writing.log 2>&1; stamp "trainer_step rc=$?"
grep "^\[" $OUT/trainer_step_writing.log | tail -3
