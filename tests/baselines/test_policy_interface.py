"""The policy interface, the factory, the scripted backend, the runner adapter and the baselines' prompt framing
(no model needed)."""

from __future__ import annotations

import pytest

from llm_marl_baselines.policies import POLICY_KINDS, ActionRequest, Generation, GenerationSettings, make_policy
from llm_marl_baselines.policies.base import Policy, RolloutPolicy, call_seed
from llm_marl_baselines.policies.scripted import ScriptedPolicy, extractive_responder, observed_turn
from llm_marl_envs.core import prompts
from llm_marl_envs.registry import make_env
from llm_marl_envs.rollout import ChatRequest


def test_generation_settings_defaults_and_round_trip() -> None:
    settings = GenerationSettings(temperature=0.0, top_p=0.5, max_new_tokens=7, seed=3)
    assert settings.greedy
    assert GenerationSettings.from_dict(settings.to_dict()) == settings
    assert not GenerationSettings().greedy
    with pytest.raises(AttributeError):
        settings.temperature = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("values", "error", "fragment"),
    [
        ({"temperature": -0.1}, ValueError, "temperature: expected >= 0"),
        ({"temperature": float("nan")}, TypeError, "temperature: expected a finite number"),
        ({"temperature": "hot"}, TypeError, "temperature"),
        ({"top_p": 0.0}, ValueError, "top_p: expected a value in (0, 1]"),
        ({"top_p": 1.5}, ValueError, "top_p"),
        ({"max_new_tokens": 0}, ValueError, "max_new_tokens: expected >= 1"),
        ({"max_new_tokens": 2.5}, TypeError, "max_new_tokens: expected int"),
        ({"max_new_tokens": True}, TypeError, "max_new_tokens: expected int"),
        ({"seed": "1"}, TypeError, "seed: expected int or None"),
    ],
)
def test_generation_settings_reject_bad_values(values: dict, error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        GenerationSettings(**values)


def test_generation_settings_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown keys \['temp'\]"):
        GenerationSettings.from_dict({"temp": 0.5})
    with pytest.raises(TypeError, match="expected a dict"):
        GenerationSettings.from_dict([("temperature", 0.5)])  # type: ignore[arg-type]


def test_action_request_validation_and_messages() -> None:
    request = ActionRequest("concise", "observe this")
    messages = request.messages()
    assert messages[0] == {"role": "system", "content": prompts.DEFAULT_SYSTEM_PROMPT}
    assert messages[1] == {"role": "user", "content": "observe this"}
    assert ActionRequest("a", "o", system="custom").messages()[0]["content"] == "custom"
    with pytest.raises(TypeError, match="agent: expected a non-empty str"):
        ActionRequest("", "o")
    with pytest.raises(TypeError, match="observation of agent 'a': expected str, got bytes"):
        ActionRequest("a", b"o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="system prompt"):
        ActionRequest("a", "o", system=3)  # type: ignore[arg-type]


def test_policy_act_validates_batch_and_settings() -> None:
    policy = ScriptedPolicy()
    settings = GenerationSettings()
    assert policy.act([], settings) == []
    with pytest.raises(TypeError, match="requests: expected a sequence of ActionRequest, got str"):
        policy.act("hello", settings)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"requests\[1\]: expected ActionRequest, got dict"):
        policy.act([ActionRequest("a", "o"), {"agent": "b"}], settings)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="settings: expected GenerationSettings"):
        policy.act([ActionRequest("a", "o")], {"temperature": 0})  # type: ignore[arg-type]


def test_policy_rejects_backend_returning_wrong_count() -> None:
    class Broken(ScriptedPolicy):
        def _act(self, requests, settings):  # type: ignore[no-untyped-def]
            return ["only one"]

    with pytest.raises(RuntimeError, match="returned 1 actions for 2 requests"):
        Broken().act([ActionRequest("a", "o"), ActionRequest("b", "o")], GenerationSettings())


def test_make_policy_registry() -> None:
    assert set(POLICY_KINDS) == {"scripted", "local", "adapters", "endpoint"}
    assert isinstance(make_policy("scripted"), ScriptedPolicy)
    with pytest.raises(ValueError, match=r"policy kind: expected one of \('scripted'"):
        make_policy("magic")
    with pytest.raises(TypeError, match="responder: expected a callable"):
        make_policy("scripted", responder=42)


def test_scripted_policy_reads_only_its_observation_and_follows_turns() -> None:
    writing_obs = "# Role\nTurn 1 of 3. Teammates: detailed.\n\n## Task\nSource text:\n" + "word " * 100
    coding_obs = "Turn 3 of 3.\n## Task\ndef add(a, b):\n    '''Add.'''\n"
    policy = ScriptedPolicy()
    first, last = policy.act(
        [ActionRequest("concise", writing_obs), ActionRequest("main", coding_obs)], GenerationSettings()
    )
    assert first.startswith("word word") and len(first.split("<message>")[0].split()) == 25
    assert "<message>" in first and "<done/>" not in first
    assert "def add(a, b):" in last and last.endswith("<done/>")
    assert observed_turn(writing_obs) == (1, 3)
    assert observed_turn("no header") == (1, 1)
    assert policy.calls[0][1].agent == "main"
    assert "def aux(" in extractive_responder(ActionRequest("aux", coding_obs))


def test_action_request_from_messages_keeps_the_chat() -> None:
    chat = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "OBS"}]
    request = ActionRequest.from_messages("concise", chat)
    assert request.messages() == chat and request.observation == "OBS" and request.system == "SYS"
    assert ActionRequest("concise", "OBS", "SYS").messages() == chat  # the old constructor builds the same chat
    longer = [*chat, {"role": "assistant", "content": "A"}, {"role": "user", "content": "OBS 2"}]
    assert ActionRequest.from_messages("a", longer).observation == "OBS 2"  # the latest user turn
    assert ActionRequest.from_messages("a", longer).messages() == longer
    assert ActionRequest.from_messages("a", chat[1:]).system is None
    with pytest.raises(ValueError, match=r"expected at least one user message \(the observation\), got roles"):
        ActionRequest.from_messages("a", chat[:1])
    with pytest.raises(TypeError, match=r"messages\[1\] of agent 'a': expected a mapping with str 'role'"):
        ActionRequest.from_messages("a", [chat[0], {"role": "user"}])
    with pytest.raises(TypeError, match="expected a sequence of chat messages, got str"):
        ActionRequest.from_messages("a", "hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"build the request with ActionRequest\.from_messages"):
        ActionRequest("a", "other text", "SYS", chat=(("system", "SYS"), ("user", "OBS")))


def test_rollout_policy_turns_chat_requests_into_one_batched_call() -> None:
    policy = ScriptedPolicy(lambda r: f"{r.agent}: {r.observation}")
    chats = [ChatRequest(0, "concise", 1, ({"role": "system", "content": "S"}, {"role": "user", "content": "O1"})),
             ChatRequest(1, "detailed", 1, ({"role": "system", "content": "S"}, {"role": "user", "content": "O2"}))]
    records = policy.as_rollout_policy(GenerationSettings())(chats)
    assert records == [Generation("concise: O1"), Generation("detailed: O2")]
    assert len(policy.calls) == 1 and [r.messages() for r in policy.calls[0]] == [list(c.messages) for c in chats]
    assert policy.as_rollout_policy(GenerationSettings(), records=False)(chats) == ["concise: O1", "detailed: O2"]
    with pytest.raises(TypeError, match="settings: expected GenerationSettings"):
        policy.as_rollout_policy({})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="policy: expected a Policy"):
        RolloutPolicy(object(), GenerationSettings())  # type: ignore[arg-type]


class SettingsRecorder(Policy):
    """Answers every request with the seed it was asked under."""

    def __init__(self) -> None:
        self.seeds: list[int | None] = []

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        self.seeds.append(settings.seed)
        return [str(settings.seed)] * len(requests)


def test_a_rollout_policy_gives_each_call_its_own_seed_and_replays_them() -> None:
    # The runner calls its policy once a turn: a seed reused every call would give each turn the first turn's random
    # numbers (the study did this until 2026-11-29, which changed how its trained teams ended).
    chats = [ChatRequest(0, "a", 1, ({"role": "user", "content": "O"},))]
    recorder = SettingsRecorder()
    rollout = recorder.as_rollout_policy(GenerationSettings(seed=11), records=False)
    for _ in range(4):
        rollout(chats)
    assert recorder.seeds[0] == 11 and len(set(recorder.seeds)) == 4
    assert recorder.seeds == [call_seed(11, k) for k in range(4)]
    assert all(0 <= seed < 2**31 for seed in recorder.seeds)
    replay = SettingsRecorder()
    fresh = replay.as_rollout_policy(GenerationSettings(seed=11), records=False)
    for _ in range(4):
        fresh(chats)
    assert replay.seeds == recorder.seeds  # a new rollout policy (a new batch) replays the same seeds
    other = SettingsRecorder()
    for _ in range(2):
        other.as_rollout_policy(GenerationSettings(seed=12), records=False)(chats)
    assert other.seeds == [12, 12]  # each rollout policy starts at its own settings' seed
    unseeded = SettingsRecorder()
    policy = unseeded.as_rollout_policy(GenerationSettings(seed=None), records=False)
    policy(chats), policy(chats)
    assert unseeded.seeds == [None, None]
    assert call_seed(None, 3) is None and call_seed(5, 0) == 5 and call_seed(5, 1) != call_seed(6, 1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="call: expected an int >= 0"):
            call_seed(5, bad)  # type: ignore[arg-type]


def test_the_env_owns_the_system_prompt_and_baselines_only_frame() -> None:
    coding = make_env("coding", num_agents=2, similarity="tfidf", executor="local", scheme="magrpo")
    coding.reset(seed=0)
    assert coding.system_prompt("aux") == f"{coding.SYSTEM_PROMPT} {coding.ROLE_HINTS['aux']}"  # the role's hint
    writing = make_env("writing", num_agents=2, similarity="tfidf")
    writing.reset(seed=0)
    assert writing.system_prompt("concise") == writing.SYSTEM_PROMPT  # no hint for this role
    assert writing.chat_messages("concise", "OBS")[0]["content"] == writing.system_prompt("concise")
    framed = prompts.frame_observation("OBS", "discussion_draft")
    assert framed.endswith("OBS") and "Round 1 of 2" in framed  # the observation's cue stays last
    with pytest.raises(ValueError, match="rule: expected one of"):
        prompts.frame_observation("OBS", "nope")
    sequential = prompts.sequential_observation("OBS", {"concise": "first part"})
    assert prompts.SEQUENTIAL_HEADER in sequential and "concise wrote:\nfirst part" in sequential
    assert sequential.endswith("OBS")
    assert prompts.SEQUENTIAL_HEADER not in prompts.sequential_observation("OBS", {})


def test_a_policys_stops_are_read_from_its_envs_roles() -> None:
    # What the demo and the study hand a local policy: a code role's reply ends where its code block closes, a
    # verifier (a name, no code) and every writer have no end; each role keeps its own budget.
    from llm_marl_baselines.policies import env_reply_ends, env_role_budgets
    from llm_marl_envs.envs.coding.prompts import CODE_BLOCK_CLOSED

    coding = make_env("coding", num_agents=4, similarity="tfidf", executor="local")
    writing = make_env("writing", num_agents=2, similarity="tfidf")
    assert env_reply_ends([coding]) == dict.fromkeys(("coder_1", "coder_2", "tester"), CODE_BLOCK_CLOSED)
    assert env_role_budgets([coding]) == {"coder_1": 160, "coder_2": 160, "tester": 128, "verifier": 48}
    assert env_reply_ends([writing]) == {} and env_reply_ends([]) == {}
    assert env_role_budgets([writing]) == {"concise": 48, "detailed": 96}
    # A batch of envs of one kind at several sizes: every agent of any of them.
    assert set(env_role_budgets([coding, make_env("coding", num_agents=1, similarity="tfidf", executor="local")])) \
        == {"coder_1", "coder_2", "tester", "verifier", "solo"}
