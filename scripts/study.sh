#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the main job on the embedded default model: the study's
# main preset — the MAGRPO-trained 2-agent teams shipped with the package against the untrained team, one agent and
# the same team with its adapters off, on held-out tasks of both envs, paired by task and seed (about 5 minutes on 2
# CPU cores after set-up); it writes OUT/report.md
# and prints the headline: per env, trained vs each condition as a difference with its 95 % CI and p. Extra arguments
# go to `llm-marl bench study` (e.g. --out DIR; --train to train the teams from scratch first with the shipped
# recipes' settings; --preset results for the README's results table; --preset full --train for the seeds' design).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/llm-marl" bench study --preset main "$@"
