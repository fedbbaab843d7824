#!/bin/bash
cd /tmp
BIN=/work/wt/coding-schemes/.venv/bin/llm-marl
COMMON="--envs coding --sizes 2 --split train --pairs 10 --seed 0 --dtype float32 --similarity tfidf"
for s in propose_verify magrpo_fallback; do
  nice -n 10 $BIN bench study $COMMON --conditions untrained --env-option coding.scheme=$s --out /tmp/coding-schemes-runs/$s > /tmp/coding-schemes-runs/$s.log 2>&1
done
echo ALLDONE > /tmp/coding-schemes-runs/done2
