"""The judge's two timeout paths may fire together (the SIGALRM and the wait for the program's reply, at one deadline):
end to end on the local backend, a flooding program's runs all come back as ``timeout``. The deterministic check,
which replays the alarm at every bytecode of a test run, is ``tests/test_judge_alarm_replay.py``."""

from __future__ import annotations

from sandbox_fixtures import HOSTILE_LIMITS

from llm_marl_envs.sandbox import TestJob, make_executor
from llm_marl_envs.sandbox.hostile import HOSTILE


def test_flooding_programs_all_time_out_locally() -> None:
    """End to end: the program that hit the race (``flood_forever``), several runs at once, every one ``timeout``.

    The race showed in about 1 run of 10 to 20, so this only samples it; the replay is the deterministic check.
    """
    flood = next(h for h in HOSTILE if h.name == "flood_forever")
    with make_executor("local", HOSTILE_LIMITS) as local:
        reports = local.run_many([TestJob(flood.code, [flood.test])] * 8, max_workers=4)
    outcomes = [(r.outcomes[0].status, r.outcomes[0].message, r.details) for r in reports]
    assert all(status == "timeout" for status, _, _ in outcomes), outcomes
