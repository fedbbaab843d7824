#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the linter and the whole test suite, Docker tests
# included: with LLM_MARL_REQUIRE_DOCKER=1 a missing engine or image fails those tests instead of skipping them.
#
# The suite runs in two phases: the tests that do not touch host-wide state on pytest-xdist workers (one per core, at
# most 4; PYTEST_WORKERS overrides, 0 runs them in this process), then the `serial` ones (the sandbox suite, whose
# leak checks count temp entries and containers machine-wide) alone; LLM_MARL_TEST_PHASE (tests/conftest.py) picks
# each phase's tests, so a -m of yours applies in both. Arguments go to both phases, e.g.
# `bash scripts/test.sh -m "not slow"` or `bash scripts/test.sh tests/test_env_api.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VENV:-.venv}
echo "[test] ruff"
"$VENV/bin/ruff" check .
export LLM_MARL_REQUIRE_DOCKER=${LLM_MARL_REQUIRE_DOCKER:-1}
WORKERS=${PYTEST_WORKERS:-$("$VENV/bin/python" -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}
# Each worker's torch gets its share of the cores, not all of them (oversubscribed threads mostly wait).
THREADS=$("$VENV/bin/python" -c "import os; print(max(1, len(os.sched_getaffinity(0)) // max(1, $WORKERS)))")

phase() {  # pytest with the given arguments; exit status 5 (this phase selected no test) counts as success
    local status=0
    "$VENV/bin/pytest" -q -ra "$@" || status=$?
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
}

echo "[test] pytest: tests not marked serial, $WORKERS workers"
LLM_MARL_TEST_PHASE=parallel OMP_NUM_THREADS=$THREADS phase -n "$WORKERS" "$@"
echo "[test] pytest: serial tests"
LLM_MARL_TEST_PHASE=serial phase "$@"
