#!/bin/bash
# Train split only: the untrained team (each scheme) vs one agent, 2 agents, 10 pairs, float32.
cd /tmp
BIN=/work/wt/coding-schemes/.venv/bin/llm-marl
COMMON="--envs coding --sizes 2 --split train --pairs 10 --seed 0 --dtype float32 --similarity tfidf"
nice -n 10 $BIN bench study $COMMON --conditions untrained single --env-option coding.scheme=magrpo --out /tmp/coding-schemes-runs/magrpo > /tmp/coding-schemes-runs/magrpo.log 2>&1
for s in propose_verify magrpo_fallback author_fixer; do
  nice -n 10 $BIN bench study $COMMON --conditions untrained --env-option coding.scheme=$s --out /tmp/coding-schemes-runs/$s > /tmp/coding-schemes-runs/$s.log 2>&1
done
echo ALLDONE > /tmp/coding-schemes-runs/done
