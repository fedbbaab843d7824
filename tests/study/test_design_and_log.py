"""The study's plan (cells, pairing, validation) and its episode log (fsync-ed appends, torn lines, resume)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from llm_marl_benchmarks.study.design import CONDITIONS, PRESETS, StudyDesign, config_hash
from llm_marl_benchmarks.study.episode_log import EpisodeLog


def small_design(**changes) -> StudyDesign:
    values = {"team_sizes": (2, 3), "episodes": 40, "tasks": 3, "similarity": "tfidf"}
    return StudyDesign(**{**values, **changes})


def test_full_design_plans_exactly_6000_unique_episodes_over_18_cells():
    design = StudyDesign(similarity="tfidf")
    plan = design.plan()
    assert len(plan) == 6000
    assert len({episode.key for episode in plan}) == 6000
    per_cell = Counter((e.env, e.team_size, e.condition) for e in plan)
    assert len(per_cell) == 18 and set(per_cell.values()) == {333, 334}
    # Held-out tasks by default, several seeds per task.
    assert {e.seed for e in plan if e.env == "coding"} >= {0, 1, 2}


def test_every_condition_plays_the_same_tasks_and_seeds_so_episodes_pair():
    plan = small_design(episodes=36).plan()
    by_condition: dict[str, set] = {}
    for e in plan:
        by_condition.setdefault(e.condition, set()).add((e.env, e.team_size, e.task, e.seed))
    assert by_condition["trained"] == by_condition["single"] == by_condition["untrained"]
    assert all(e.num_agents == 1 for e in plan if e.condition == "single")
    assert all(e.num_agents == e.team_size for e in plan if e.condition != "single")


def test_tasks_come_from_the_chosen_split_and_the_seed():
    design = small_design()
    ids = design.task_ids("coding")
    assert len(ids) == 3 and ids == small_design().task_ids("coding")
    assert ids != small_design(seed=5).task_ids("coding")
    from llm_marl_envs.registry import make_env

    evaluation = set(make_env("coding", num_agents=1).task_source.ids("eval"))
    assert set(ids) <= evaluation


def test_env_kwargs_follow_the_condition():
    design = small_design(max_turns=4)
    assert design.env_kwargs_for("writing", "single", 3)["num_agents"] == 1
    assert design.env_kwargs_for("writing", "untrained", 3) == {
        "similarity": "tfidf", "num_agents": 3, "max_turns": 4, "observability": "team"}
    trained = design.env_kwargs_for("coding", "trained", 2)
    assert trained["observability"] == "local" and trained["max_turns"] == 4


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"conditions": ("trained", "solo")}, "condition"),
        ({"team_sizes": (2, 5)}, "team size"),
        ({"team_sizes": (1,)}, "team size"),
        ({"envs": ("poetry",)}, "env"),
        ({"episodes": 3}, "episodes"),
        ({"team_sizes": (2, 2)}, "listed twice"),
        ({"split": "test"}, "split"),
    ],
)
def test_bad_designs_are_one_clear_error(changes, message):
    with pytest.raises(ValueError, match=message):
        small_design(**changes)


def test_asking_for_more_tasks_than_the_split_has_is_refused():
    with pytest.raises(ValueError, match="tasks"):
        small_design(tasks=10_000).plan()


def test_conditions_registry_names_the_seeds_three_and_the_other_baselines():
    assert {"trained", "single", "untrained"} <= set(CONDITIONS)
    assert {"naive_concatenation", "sequential_pipeline", "one_round_discussion"} <= set(CONDITIONS)
    assert [c for c in CONDITIONS.values() if c.trained] == [CONDITIONS["trained"]]


def test_the_base_condition_is_the_trained_teams_setting_with_the_adapters_off():
    """``trained`` vs ``base`` isolates training: same schedule, prompts, visibility and env arguments, no adapters."""
    base, trained = CONDITIONS["base"], CONDITIONS["trained"]
    assert base.baseline == trained.baseline and not base.trained and not base.single_agent
    design = small_design(conditions=("trained", "base"))
    for env in design.envs:
        assert design.env_kwargs_for(env, "base", 2) == design.env_kwargs_for(env, "trained", 2)
    assert design.env_kwargs_for("writing", "untrained", 2) != design.env_kwargs_for("writing", "trained", 2)
    # Paired: every (env, size, task, seed) the trained team plays, the base team plays too.
    keys = {c: {e.key.split("/", 1)[1] for e in design.plan() if e.condition == c} for c in ("trained", "base")}
    assert keys["trained"] == keys["base"] and keys["base"]
    assert {"trained", "untrained", "single", "base"} <= set(PRESETS["results"]["design"]["conditions"])


def test_every_multi_turn_condition_gets_the_same_turn_budget_four_by_default():
    design = small_design()
    assert design.max_turns == 4
    for condition in ("trained", "base", "untrained", "single"):
        for env in design.envs:
            assert design.env_kwargs_for(env, condition, 3)["max_turns"] == 4, condition
            assert design.turn_budget(condition) == 4
    # The same feedback: the trained team, its base and the single agent play the env's own prompts (local view).
    assert CONDITIONS["single"].baseline != CONDITIONS["untrained"].baseline
    assert design.env_kwargs_for("coding", "single", 3) == {**design.env_kwargs_for("coding", "trained", 3),
                                                            "num_agents": 1}
    assert small_design(max_turns=6).env_kwargs_for("writing", "single", 2)["max_turns"] == 6


def test_single_is_one_agent_with_the_budget_and_single_oneshot_is_magrpos_one_turn_agent():
    design = small_design(conditions=("trained", "single", "single_oneshot"))
    assert CONDITIONS["single"].single_agent and CONDITIONS["single_oneshot"].single_agent
    assert design.env_kwargs_for("writing", "single_oneshot", 2) == {
        "similarity": "tfidf", "num_agents": 1, "max_turns": 1, "observability": "local"}
    assert design.turn_budget("single_oneshot") == 1
    assert all(e.num_agents == 1 for e in design.plan() if e.condition in ("single", "single_oneshot"))
    # Token budgets: one agent writing everything gets its solo role's; a team its roles'; one override for all.
    from llm_marl_envs.registry import make_env

    solo, team = (make_env("writing", num_agents=n, similarity="tfidf").suggested_max_new_tokens() for n in (1, 2))
    assert design.token_budget("writing", "single", 2) == design.token_budget("writing", "single_oneshot", 3) == solo
    assert design.token_budget("writing", "trained", 2) == team
    assert small_design(max_new_tokens=64).token_budget("writing", "single", 2) == 64


def test_the_single_agent_plays_turns_and_may_end_early_with_the_envs_feedback():
    from llm_marl_baselines.collaboration import get_baseline
    from llm_marl_envs import rollout
    from llm_marl_envs.registry import make_env

    design = small_design()
    spec = get_baseline(CONDITIONS["single"].baseline)
    replies = iter(["A first try.", "A better summary of the whole article, in a few sentences. <done/>"])
    env = make_env("writing", **design.env_kwargs_for("writing", "single", 2))
    (episode,) = rollout.run_episodes([env], lambda requests: [next(replies) for _ in requests], seeds=[0],
                                      schedule=spec.schedule)
    assert episode.agents == ("solo",) and episode.turns == 2 < design.max_turns
    first, second = (step.messages[-1]["content"] for step in episode.steps)
    assert "A first try." in second and "A first try." not in first  # it refines its own draft, as a team's agent


def test_presets_have_the_pairs_the_issue_asks_for():
    counts = {}
    for preset in ("main", "results"):
        design = StudyDesign(**{**PRESETS[preset]["design"], "similarity": "tfidf"})
        counts[preset] = Counter((e.env, e.team_size, e.condition) for e in design.plan())
        assert design.max_turns == 4
    results, main_counts = counts["results"], counts["main"]
    for env in ("writing", "coding"):
        for condition in ("trained", "untrained", "single", "base", "single_oneshot"):
            assert results[(env, 2, condition)] >= 40
            for size in (3, 4):
                assert results[(env, size, condition)] >= 24
        for condition in ("trained", "untrained", "single"):
            assert main_counts[(env, 2, condition)] >= 16
    # One agent's best of n is a coding control: every coding cell of both presets has it, no writing cell.
    for size, pairs in ((2, 40), (3, 24), (4, 24)):
        assert results[("coding", size, "single_best_of_n")] >= pairs
        assert ("writing", size, "single_best_of_n") not in results
    assert main_counts[("coding", 2, "single_best_of_n")] >= 16
    assert ("writing", 2, "single_best_of_n") not in main_counts
    assert {size for _, size, _ in main_counts} == {2}
    # The main job pairs distinct tasks: 16 held-out tasks per env, one seed each.
    main = StudyDesign(**{**PRESETS["main"]["design"], "similarity": "tfidf"})
    assert len({(e.task, e.seed) for e in main.plan() if e.env == "coding" and e.condition == "single"}) == 16


def test_a_team_size_without_a_trained_team_plays_every_other_condition():
    design = small_design(team_sizes=(2, 3, 4), cell_episodes={2: 6, 3: 4, 4: 4},
                          missing_teams=(("writing", 3), ("writing", 4), ("coding_v0", 4)))
    plan = design.plan()
    cells = Counter((e.env, e.team_size, e.condition) for e in plan)
    assert ("writing", 3, "trained") not in cells and ("coding", 4, "trained") not in cells
    assert cells[("coding", 3, "trained")] == 4 and cells[("writing", 2, "trained")] == 6
    assert cells[("writing", 3, "untrained")] == cells[("writing", 3, "single")] == 4
    assert design.skipped_cells() == [("writing", 3, "trained"), ("writing", 4, "trained"), ("coding", 4, "trained")]
    assert design.episodes == len(plan)
    from llm_marl_benchmarks.study.design import cells_needing_teams

    assert cells_needing_teams(design) == [("writing", 2), ("coding", 2), ("coding", 3)]
    with pytest.raises(ValueError, match="leaves no cell"):
        small_design(conditions=("trained",), team_sizes=(2,), missing_teams=(("writing", 2), ("coding", 2)))


def test_single_best_of_n_plays_coding_only_with_the_teams_turns_and_sampling_budget():
    """One agent with ``single``'s turns, feedback, endings and reply budget, sampling as many candidates a turn as
    the cell's team has agents: its completion tokens a turn match the team's. It needs visible tests, so its writing
    cells are left out (and said to be); a design where it has no cell at all is refused by name."""
    from llm_marl_benchmarks.study.execution import make_batches

    design = small_design(team_sizes=(2, 3, 4), conditions=("untrained", "single", "single_best_of_n"),
                          cell_episodes={2: 2, 3: 2, 4: 2})
    cells = Counter((e.env, e.team_size, e.condition) for e in design.plan())
    assert not any(env == "writing" and c == "single_best_of_n" for env, _, c in cells)
    assert all(cells[("coding", size, "single_best_of_n")] == 2 for size in (2, 3, 4))
    assert design.skipped_cells() == [("writing", size, "single_best_of_n") for size in (2, 3, 4)]
    best = CONDITIONS["single_best_of_n"]
    assert best.single_agent and best.best_of_n and not best.trained and not CONDITIONS["single"].best_of_n
    assert design.env_kwargs_for("coding", "single_best_of_n", 3) == design.env_kwargs_for("coding", "single", 3)
    assert design.turn_budget("single_best_of_n") == design.turn_budget("single") == design.turn_budget("untrained")
    for size in (2, 3, 4):
        assert design.token_budget("coding", "single_best_of_n", size) == design.token_budget("coding", "single", size)
        assert (size * design.token_budget("coding", "single_best_of_n", size)
                == size * design.token_budget("coding", "untrained", size))
    episodes = [e for e in design.plan() if e.condition == "single_best_of_n"]
    assert [(e.num_agents, e.candidates, e.rows) for e in episodes] == [(1, s, s) for s in (2, 2, 3, 3, 4, 4)]
    # A lockstep batch holds at most max_rows generate rows: a best-of-4 agent takes four.
    batches = make_batches(episodes, 64, {}, design, max_rows=4)
    assert [[e.team_size for e in b.episodes] for b in batches] == [[2, 2], [3], [3], [4], [4]]
    with pytest.raises(ValueError, match=r"single_best_of_n plays only \['coding'\]"):
        small_design(envs=("writing",), conditions=("single_best_of_n",))


@pytest.mark.parametrize(
    ("cell_episodes", "message"),
    [({2: 5}, "each team size"), ({2: 5, 3: 0}, r"cell_episodes\[3\]"), ({2: 5, 3: 2, 4: 1}, "each team size")],
)
def test_episodes_per_cell_are_checked(cell_episodes, message):
    with pytest.raises(ValueError, match=message):
        small_design(cell_episodes=cell_episodes)


def test_config_hash_changes_with_what_decides_outcomes():
    a = config_hash({"design": small_design().to_dict()})
    assert a == config_hash({"design": small_design().to_dict()})
    assert a != config_hash({"design": small_design(max_new_tokens=64).to_dict()})


# ------------------------------------------------------------------------------------------------------------- log
def test_log_appends_durably_and_ignores_keys_it_has(tmp_path):
    log = EpisodeLog(tmp_path, "h1")
    assert log.append([{"key": "a", "x": 1}, {"key": "b", "x": 2}]) == 2
    assert log.append([{"key": "a", "x": 99}, {"key": "c", "x": 3}]) == 1
    again = EpisodeLog(tmp_path, "h1")
    assert again.done() == {"a", "b", "c"}
    assert again.rows["a"]["x"] == 1
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "b", "c"]
    assert all(json.loads(line)["config_hash"] == "h1" for line in lines)


def test_a_torn_last_line_is_cut_before_the_next_append(tmp_path):
    log = EpisodeLog(tmp_path, "h1")
    log.append([{"key": "a"}])
    with (tmp_path / "episodes.jsonl").open("a") as handle:
        handle.write('{"key": "b", "config_hash": "h1", "tur')  # a kill in the middle of a write
    resumed = EpisodeLog(tmp_path, "h1")
    assert resumed.done() == {"a"} and resumed.torn_lines == 1
    resumed.append([{"key": "b"}])
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["a", "b"]


def test_another_studys_log_is_refused(tmp_path):
    EpisodeLog(tmp_path, "h1").append([{"key": "a"}])
    with pytest.raises(ValueError, match="another study"):
        EpisodeLog(tmp_path, "h2")



def test_a_study_plans_its_coding_budgets_on_a_machine_without_a_sandbox() -> None:
    """Planning builds coding envs only to read them (roles' token budgets, tasks, ending, turn-1 prompts), which runs
    no code: it must not need Docker or bwrap (a GPU machine without either ran ``--executor local`` and failed in the
    planning, before any episode). A fresh interpreter (executors are shared per process) on a machine made
    sandbox-less: no engine answers at ``DOCKER_HOST`` and no ``bwrap`` is on ``PATH``. The design names no executor,
    so every reader goes through the probe (:meth:`StudyDesign.probe_env`)."""
    import os
    import subprocess
    import sys

    script = (
        "from llm_marl_envs.registry import make_env\n"
        "from llm_marl_benchmarks.study.cli import env_endings, prompt_digests\n"
        "from llm_marl_benchmarks.study.design import StudyDesign\n"
        "try:\n"
        "    make_env('coding', num_agents=2, similarity='tfidf')\n"
        "    print('sandbox found')\n"
        "except Exception as error:\n"
        "    print('no sandbox:', type(error).__name__)\n"
        "design = StudyDesign(envs=('coding',), team_sizes=(2,), conditions=('untrained', 'single'), episodes=4,\n"
        "                     tasks=2, similarity='tfidf')\n"
        "print('budget', design.token_budget('coding', 'untrained', 2))\n"
        "print('plan', len(design.plan()), env_endings(design)['coding'], sorted(prompt_digests(design)))\n"
    )
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock", "PATH": "/nonexistent"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "no sandbox: NoIsolationError"  # the machine really has none
    assert lines[1].startswith("budget ") and int(lines[1].split()[1]) > 0
    assert lines[2] == "plan 4 half ['coding', 'rules']"


def test_a_probe_env_is_built_as_its_cell_plays_it_and_runs_no_code():
    # One helper builds every env the study only reads (tasks, budgets, ending, prompts): the design's own options
    # (here another scheme), the cell's team size, and the executor that needs no sandbox whatever the design says.
    design = small_design(envs=("coding",), env_kwargs={"coding": {"scheme": "magrpo", "executor": "docker"}})
    with design.probe_env("coding", "untrained", 2) as team:
        assert team.possible_agents == ["aux", "main"] and team.executor.backend == "local"
        budget = team.suggested_max_new_tokens()
    with design.probe_env("coding", "single", 2) as one:
        assert one.possible_agents == ["solo"]
    with design.probe_env("coding", team_size=3) as three:
        assert len(three.possible_agents) == 3
    assert design.token_budget("coding", "untrained", 2) == budget
    assert design.task_ids("coding") == small_design(envs=("coding",)).task_ids("coding")
