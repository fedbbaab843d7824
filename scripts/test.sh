#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the linter and the whole test suite, Docker tests
# included: with LLM_MARL_REQUIRE_DOCKER=1 a missing engine or image fails those tests instead of skipping them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VENV:-.venv}
echo "[test] ruff"
"$VENV/bin/ruff" check .
echo "[test] pytest"
export LLM_MARL_REQUIRE_DOCKER=${LLM_MARL_REQUIRE_DOCKER:-1}
exec "$VENV/bin/pytest" -q -ra "$@"
