"""The rollout runner: lockstep episodes over a batch of envs, and MAGRPO's branching tree."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from envs_helpers import ENV_FACTORIES, scripted_action

from llm_marl_envs.rollout import ChatRequest, TreeNode, rollout_tree, run_episodes

ENV_NAMES = sorted(ENV_FACTORIES)


@dataclass(frozen=True)
class Record:
    """A stand-in generation record: the runner must keep it whole."""

    text: str
    token_count: int


class ScriptedPolicy:
    """Answers each request with the test helpers' scripted action; counts calls and requests."""

    def __init__(self, envs: list, finish_first_agent_at: int | None = None) -> None:
        self.envs, self.finish_first_agent_at = envs, finish_first_agent_at
        self.calls: list[list[ChatRequest]] = []

    def __call__(self, requests: list[ChatRequest]) -> list[Record]:
        self.calls.append(list(requests))
        out = []
        for request in requests:
            env = self.envs[request.env_index]
            text = scripted_action(env, request.agent, request.turn)
            if self.finish_first_agent_at == request.turn and request.agent == env.possible_agents[0]:
                text += "<done/>"
            out.append(Record(text, len(text.split())))
        return out


@pytest.mark.parametrize("name", ENV_NAMES)
@pytest.mark.parametrize("num_agents", [1, 2, 3, 4])
def test_lockstep_episodes_one_policy_call_per_turn(name: str, num_agents: int) -> None:
    # end_quorum="all": a teammate plays on after the first agent finishes.
    envs = [ENV_FACTORIES[name](num_agents=num_agents, max_turns=3, end_quorum="all") for _ in range(3)]
    team = num_agents > 1
    policy = ScriptedPolicy(envs, finish_first_agent_at=1 if team else None)
    seen_turns: list[tuple[int, int]] = []
    finished: list[int] = []
    trajectories = run_episodes(
        envs,
        policy,
        seeds=[0, 1, 2],
        on_turn=lambda i, t: seen_turns.append((i, t)),
        on_episode=lambda tr: finished.append(tr.env_index),
    )
    assert len(policy.calls) == 3  # one call per turn for every live agent of every env
    assert len(policy.calls[0]) == 3 * num_agents
    first = envs[0].possible_agents[0]
    # In a team the first agent finished at turn 1: it is not asked again, its teammates are.
    assert all(r.agent != first for call in policy.calls[1:] for r in call) == team
    assert sorted(finished) == [0, 1, 2] and len(seen_turns) == 9
    for env, trajectory in zip(envs, trajectories, strict=True):
        assert trajectory.turns == 3 and trajectory.team_return == pytest.approx(env.state()["team_return"])
        assert [s.turn for s in trajectory.agent_steps(first)] == ([1] if team else [1, 2, 3])
        assert trajectory.final_drafts == env.state()["drafts"]
        assert trajectory.config == env.config.to_dict() and trajectory.config["team"]["num_agents"] == num_agents
        step = trajectory.steps[0]
        assert step.messages[0]["role"] == "system" and step.messages[1]["role"] == "user"
        assert isinstance(step.generation, Record) and step.generation.text == step.action
        assert set(step.reward_components) >= {"quality", "consistency", "turns"}
        assert sum(s.reward for s in trajectory.steps if s.agent == env.possible_agents[-1]) == pytest.approx(
            trajectory.team_return
        )


def test_the_policy_must_answer_every_request() -> None:
    envs = [ENV_FACTORIES["writing"](num_agents=2)]
    with pytest.raises(RuntimeError, match="1 completions for 2 requests"):
        run_episodes(envs, lambda requests: ["only one"], seeds=[0])
    with pytest.raises(TypeError, match="expected a str or an object with a str 'text'"):
        run_episodes(envs, lambda requests: [3] * len(requests), seeds=[0])


@pytest.mark.parametrize("name", ENV_NAMES)
@pytest.mark.parametrize(("joint", "group_size"), [("aligned", 4), ("cross", 2)])
def test_branching_tree_from_snapshots(name: str, joint: str, group_size: int) -> None:
    envs = [ENV_FACTORIES[name](num_agents=2, max_turns=2) for _ in range(2)]
    counter = iter(range(10**6))

    def policy(requests: list[ChatRequest]) -> list[str]:
        # Every sample differs, so each child's drafts show which samples it took.
        return [scripted_action(envs[r.env_index], r.agent, r.turn) + f"\n# sample {next(counter)}" for r in requests]

    roots = rollout_tree(envs, policy, group_size=group_size, joint=joint, seeds=[0, 1])
    width = group_size if joint == "aligned" else group_size**2
    for root in roots:
        assert root.depth == 0 and len(root.children) == width
        assert all(len(child.children) == width and child.depth == 1 for child in root.children)
        leaves = [node for node in root.nodes() if not node.children]
        assert len(leaves) == width * width and all(leaf.depth == 2 and leaf.done for leaf in leaves)
        # Siblings start from the same position: every child acted at turn 1, every grandchild at turn 2.
        assert {step.turn for child in root.children for step in child.steps} == {1}
        assert {s.turn for child in root.children for g in child.children for s in g.steps} == {2}
        # aligned pairs the k-th samples; cross takes every combination
        indices = {child.sample_index for child in root.children}
        samples = range(group_size)
        expected = {(k, k) for k in samples} if joint == "aligned" else {(i, j) for i in samples for j in samples}
        assert indices == expected
        actions = {(c.steps[0].action, c.steps[1].action) for c in root.children}
        assert len(actions) == width


def test_branch_rewards_equal_a_replay_of_the_same_actions() -> None:
    env = ENV_FACTORIES["writing"](num_agents=2, max_turns=2)
    roots = rollout_tree(
        [env], lambda reqs: [f"Fires near Hill Top, take {i}." for i, _ in enumerate(reqs)], group_size=2, seeds=[5]
    )
    child: TreeNode = roots[0].children[1]
    replay = ENV_FACTORIES["writing"](num_agents=2, max_turns=2)
    replay.reset(seed=5)
    _, rewards, _, _, _ = replay.step({s.agent: s.action for s in child.steps})
    assert child.reward == pytest.approx(rewards[child.steps[0].agent])
    with pytest.raises(ValueError, match="group_size"):
        rollout_tree([env], lambda reqs: [], group_size=0)
    with pytest.raises(ValueError, match="joint"):
        rollout_tree([env], lambda reqs: [], group_size=2, joint="diagonal")


def test_early_termination_stops_branches_whose_group_did_well_enough() -> None:
    """A node grows further turns only while its joint actions' mean reward is not above the threshold; with the
    same (deterministic) samples, the pruned tree is the full tree cut exactly there."""

    def grow(threshold: float | None) -> list[TreeNode]:
        envs = [ENV_FACTORIES["writing"](num_agents=2, max_turns=3) for _ in range(2)]

        def policy(requests: list[ChatRequest]) -> list[str]:
            # Deterministic and different per sample (the runner asks each request G = 2 times in a row): a prefix of
            # the scripted draft whose length depends on the sample and the turn, so groups earn different rewards.
            texts = []
            for i, r in enumerate(requests):
                words = scripted_action(envs[r.env_index], r.agent, r.turn).split()
                texts.append(" ".join(words[: max(3, len(words) * (i % 2 + 1 + r.turn) // 5)]))
            return texts

        return rollout_tree(envs, policy, group_size=2, seeds=[0, 1], early_termination_threshold=threshold)

    full = grow(None)
    means = [sum(c.reward for c in node.children) / len(node.children)
             for root in full for node in root.nodes() if node.children]
    threshold = sorted(means)[len(means) // 2]  # some groups above it, some not
    assert min(means) <= threshold < max(means)
    pruned = grow(threshold)

    def expected_shape(node: TreeNode, parent_mean_above: bool) -> list:
        if parent_mean_above or not node.children:
            return []
        mean = sum(c.reward for c in node.children) / len(node.children)
        return [(c.reward, expected_shape(c, mean > threshold)) for c in node.children]

    def shape(node: TreeNode) -> list:
        return [(c.reward, shape(c)) for c in node.children]

    for full_root, pruned_root in zip(full, pruned, strict=True):
        assert shape(pruned_root) == expected_shape(full_root, False)
    assert sum(len(r.nodes()) for r in pruned) < sum(len(r.nodes()) for r in full)
    # Below every group's mean: only the first turn is grown.
    assert all(not c.children for root in grow(min(means) - 1.0) for c in root.children)
    with pytest.raises(ValueError, match="early_termination_threshold"):
        rollout_tree([ENV_FACTORIES["writing"](num_agents=2)], lambda reqs: [], group_size=2,
                     early_termination_threshold=float("nan"))


@pytest.mark.parametrize("branch", [1, 2, 3])
def test_branch_turns_grow_one_rollout_to_the_branching_turn_and_one_after_each_branch(branch: int) -> None:
    """``branch_turns``: G samples at the branching turn only; before it one joint action a turn, after it each of the
    G branches rolled out once, to the end of the episode."""
    envs = [ENV_FACTORIES["writing"](num_agents=2, max_turns=3) for _ in range(2)]
    asked: list[tuple[int, int]] = []

    def policy(requests: list[ChatRequest]) -> list[str]:
        asked.extend((r.env_index, r.turn) for r in requests)
        return [f"{scripted_action(envs[r.env_index], r.agent, r.turn)} take {i}." for i, r in enumerate(requests)]

    roots = rollout_tree(envs, policy, group_size=4, seeds=[0, 1], branch_turns=[{branch}, None])
    branched, full = roots
    assert len(full.nodes()) == 1 + 4 + 16 + 64  # the second env grows the full tree
    for node in branched.nodes():
        if node.children:
            turn = node.depth + 1
            assert len(node.children) == (4 if turn == branch else 1)
            assert {c.sample_index for c in node.children} == ({(k, k) for k in range(4)} if turn == branch
                                                                else {(0, 0)})
    leaves = [n for n in branched.nodes() if not n.children]
    assert len(leaves) == 4 and all(leaf.depth == 3 for leaf in leaves)
    # Each agent was asked once a turn before the branch, G times at it, and once per branch after it.
    per_turn = {turn: sum(1 for env, t in asked if env == 0 and t == turn) for turn in (1, 2, 3)}
    assert per_turn == {t: 2 * (1 if t < branch else 4) for t in (1, 2, 3)}
    with pytest.raises(ValueError, match="branch_turns"):
        rollout_tree(envs, policy, group_size=2, branch_turns=[{1}])


@pytest.mark.parametrize("end_turn", [1, 2])
def test_an_episode_that_ends_before_its_branching_turn_branches_where_it_ends(end_turn: int) -> None:
    """A tree that would branch at turn 3 but whose rollout ends at ``end_turn`` sets that joint action aside and
    samples G fresh ones at the node it came from: the tree still yields a group, at the turn where teams end."""
    envs = [ENV_FACTORIES["writing"](num_agents=2, max_turns=4)]
    asked: list[int] = []

    def policy(requests: list[ChatRequest]) -> list[str]:
        asked.extend(r.turn for r in requests)
        # Both agents end at end_turn, in every sample: the first rollout to reach it ends the episode.
        return [f"{r.agent} writes part {i}." + (" <done/>" if r.turn == end_turn else "")
                for i, r in enumerate(requests)]

    (root,) = rollout_tree(envs, policy, group_size=4, seeds=[0], branch_turns=[{3}])
    node = root
    for _ in range(end_turn - 1):  # one joint action a turn up to the node the episode ended from
        assert len(node.children) == 1
        node = node.children[0]
    assert len(node.children) == 4 and all(child.done for child in node.children)
    assert {child.sample_index for child in node.children} == {(k, k) for k in range(4)}
    assert all(child.depth == end_turn for child in node.children)
    # Before end_turn one sample per agent a turn; at it, the set-aside sample and then the G fresh ones.
    assert asked.count(end_turn) == 2 * (1 + 4)
    assert all(asked.count(t) == 2 for t in range(1, end_turn))
    assert max(asked) == end_turn  # no turn after the episode's end, and no second branching at turn 3


def test_a_tree_that_branched_is_not_branched_again_when_a_branch_ends_early() -> None:
    """Branches that end after the branching turn are leaves as usual: only a tree that has not branched yet moves its
    branching turn."""
    # end_quorum="all": a branch whose one agent happens to resubmit its draft at turn 2 plays on to turn 3.
    envs = [ENV_FACTORIES["writing"](num_agents=2, max_turns=4, end_quorum="all")]

    def policy(requests: list[ChatRequest]) -> list[str]:
        return [f"{r.agent} writes part {i}." + (" <done/>" if r.turn == 3 else "") for i, r in enumerate(requests)]

    (root,) = rollout_tree(envs, policy, group_size=4, seeds=[0], branch_turns=[{2}])
    widths = [len(node.children) for node in root.nodes() if node.children]
    assert widths == [1, 4, 1, 1, 1, 1]  # turn 1 single, G at turn 2, each branch once at turn 3 where it ends
    assert all(leaf.depth == 3 and leaf.done for leaf in root.nodes() if not leaf.children)
    with pytest.raises(ValueError, match="branch_turns"):
        rollout_tree(envs, policy, group_size=2, branch_turns=[{0}, None])
