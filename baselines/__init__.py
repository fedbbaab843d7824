"""Policies and collaboration baselines for the llm-marl-envs suite.

* :mod:`baselines.policies` — one interface (a batch of agent observations → action strings) over a local Hugging
  Face model, trained per-role LoRA adapters, an OpenAI-compatible endpoint, and scripted policies.
* :mod:`baselines.models` — the one place that loads models (default SmolLM2-135M-Instruct, offline).
* :mod:`baselines.prompts` — every prompt the baselines add, per task and role.
* :mod:`baselines.collaboration` — the five baselines (``BASELINES``) and :func:`~baselines.collaboration.run_episodes`.

Importing this package imports neither torch nor transformers; backends load them when built.
"""
