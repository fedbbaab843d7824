#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the main job on the embedded default:
# a few real episodes of both envs driven by SmolLM2-135M-Instruct. Extra arguments go to `llm-marl demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/llm-marl" demo "$@"
