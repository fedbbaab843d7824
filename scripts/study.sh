#!/usr/bin/env bash
# Set everything up from scratch (scripts/setup.sh), then run the main job on the embedded default model: the study's
# main preset — the MAGRPO-trained 2-agent teams shipped with the package against the untrained team and one agent,
# on 16 held-out tasks per env (16 pairs each), every condition with the same 4-turn budget, feedback and endings,
# paired by task and seed. It prints a progress line per turn of each running batch, writes OUT/report.md and prints
# the headline: per env, trained vs untrained vs single on quality, pass rate, turns to the end, critical-path tokens
# and wall time (each pair a difference with its 95 % CI and p; team return between the teams only), then the seeds'
# three figures beside ours; the coding cell adds one agent's best of 2. Time after set-up: 112 episodes in 18 min 1 s
# on 2 cores of an AMD EPYC without native bf16, where the policies run in float32, with code replies stopped where
# their block closes (the default since 2026-12-06: docs/results/study-main-reply-end/); 28 min 46 s with them
# unstopped (docs/results/study-main-2026-12-06/). Earlier, before best of 2 and the propose_verify coding-2 joined
# the job, 96 episodes: 8 min 42 s on 2 idle cores with native bf16 (2026-11-26, writing ending under "all":
# docs/results/study-main-quorum-all/), 27 min 15 s on the AMD EPYC in float32 (2026-11-27: docs/results/study-main/),
# 26 min 51 s there with the decode loop of 48c4ccc (docs/results/study-main-2026-11-28/; the loop's gains and their
# limits: docs/study.md), 22 min 18 s with each batch's prompt store (2026-11-28:
# docs/results/study-main-prompt-store/).
# Extra arguments go to `llm-marl bench study` (e.g. --out DIR; --train to train the teams from scratch first with the
# shipped recipes' settings; --preset results for the README's results table; --preset full --train for the seeds'
# design).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${VENV:-.venv}/bin/llm-marl" bench study --preset main "$@"
