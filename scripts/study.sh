#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the main job on the embedded default model: the study's
# smoke preset — train a 2-agent team per env briefly with MAGRPO, evaluate the trained team, a single agent and an
# untrained team on held-out tasks, write OUT/report.md and print the headline table. Extra arguments go to
# `llm-marl bench study` (e.g. --out DIR; --preset full --train for the seeds' 6,000-episode design).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/llm-marl" bench study --preset smoke "$@"
