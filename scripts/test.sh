#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the linter and the whole test suite, Docker tests
# included: with LLM_MARL_REQUIRE_DOCKER=1 a missing engine or image fails those tests instead of skipping them.
#
# The suite runs in phases: the tests that do not touch host-wide state on pytest-xdist workers (one per core, at most
# 4; PYTEST_WORKERS overrides, 0 runs them in this process); then the `serial` ones (the sandbox suite: fork bombs up
# to a per-user process limit, process-group kills) with no other sandbox on the machine, and next to them, in one
# more process, the tests marked `beside_serial` (CPU-bound, never a sandbox), because the serial phase mostly waits
# on timeouts and containers and leaves a core idle. LLM_MARL_TEST_PHASE (tests/conftest.py) picks each phase's
# tests, so a -m of yours applies in each. Arguments go to every phase, e.g. `bash scripts/test.sh -m "not slow"` or
# `bash scripts/test.sh tests/test_env_api.py`.
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

# Every phase always runs. Exit status: the first failing phase's (parallel, serial, beside); 5 (no test selected) only
# when no phase selected a test (e.g. a -k that matches nothing).
statuses=()
# --durations: each phase ends with its slowest tests, so a log shows where the suite's time goes.
PYTEST=("$VENV/bin/pytest" -q -ra --durations=25)
phase() {
    local status=0
    "${PYTEST[@]}" "$@" || status=$?
    statuses+=("$status")
}

echo "[test] pytest: tests marked neither serial nor beside_serial, $WORKERS workers"
LLM_MARL_TEST_PHASE=parallel OMP_NUM_THREADS=$THREADS phase -n "$WORKERS" "$@"
echo "[test] pytest: serial tests, with the beside_serial tests running next to them (their output follows)"
beside_log=$(mktemp)
beside_status=0
# With no arguments the beside phase collects only the files that mark a test beside_serial (collecting the whole
# suite would cost it about 20 s, and it is the longer of the two).
beside_args=("$@")
if [ "$#" -eq 0 ]; then
    mapfile -t beside_args < <(grep -rlE --include='test_*.py' '^@pytest\.mark\.beside_serial\b' tests | sort)
fi
LLM_MARL_TEST_PHASE=beside OMP_NUM_THREADS=1 "${PYTEST[@]}" "${beside_args[@]}" >"$beside_log" 2>&1 &
beside_pid=$!
trap 'kill "$beside_pid" 2>/dev/null || true; rm -f "$beside_log"' EXIT
# With no arguments the serial phase collects only tests/sandbox, where every serial test lives: collecting the whole
# suite imports every test module's libraries again (about 20 s) to deselect them all.
if [ "$#" -eq 0 ]; then
    LLM_MARL_TEST_PHASE=serial phase tests/sandbox
else
    LLM_MARL_TEST_PHASE=serial phase "$@"
fi
wait "$beside_pid" || beside_status=$?
statuses+=("$beside_status")
echo "[test] pytest: beside_serial tests (ran next to the serial phase)"
cat "$beside_log"
for status in "${statuses[@]}"; do
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
if [ "${statuses[0]}" -eq 5 ] && [ "${statuses[1]}" -eq 5 ] && [ "${statuses[2]}" -eq 5 ]; then exit 5; fi
exit 0
