"""Policies and collaboration baselines for the llm-marl-envs suite.

* :mod:`llm_marl_baselines.policies` — one interface (a batch of agent chats → action strings or generation records)
  over a local Hugging Face model, trained per-role LoRA adapters, an OpenAI-compatible endpoint, and scripted policies;
  ``policy.as_rollout_policy(settings)`` is the batched callable :mod:`llm_marl_envs.rollout` drives.
* :mod:`llm_marl_baselines.models` — the one place that loads models (default SmolLM2-135M-Instruct, offline).
* :mod:`llm_marl_baselines.collaboration` — the five baselines (``BASELINES``: env configuration + rollout schedule) and
  :func:`~llm_marl_baselines.collaboration.run_episodes`, a driver over the env package's one rollout runner.

The prompts are the env's (``env.chat_messages(agent)``; the baselines' rule blocks are in
:mod:`llm_marl_envs.core.prompts`). Importing this package imports neither torch nor transformers; backends load
them when built.
"""
