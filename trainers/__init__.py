"""MAGRPO / GRPO training for the suite's envs (needs the ``train`` extra: torch, transformers, peft).

Modules:

- :mod:`llm_marl_trainers.advantages` — the one home of returns and advantages, what the trainer calls
  (``batch_samples``): MAGRPO tree returns ``R = r + γ·mean(children R)``, group-relative advantages with TRL's
  ``scale_rewards`` (group / batch / none), the per-agent advantage ``A_i = R_i − mean_j R_j``, the critic's value
  targets and the reward metrics (``reward``, ``reward_std``, ``frac_reward_zero_std``). Pure functions.
- :mod:`llm_marl_trainers.losses` — the policy losses behind one registry (``LOSSES``) and one dispatch
  (``policy_loss``): ``magrpo`` (on-policy REINFORCE), and TRL's ``grpo`` / ``dr_grpo`` / ``dapo`` (clipped ratio,
  ``beta`` k3 KL); plus ``sequence_logprobs`` and ``entropy_from_logits``.
- :mod:`llm_marl_trainers.generation` — :class:`~llm_marl_trainers.generation.TeamModel`: one LoRA adapter per agent on
  one frozen base (or a base per agent), every agent × G × env row in one ``generate`` call, log-probabilities for the
  loss; :mod:`llm_marl_trainers.lora_routing` — how each row of a batch runs under its own agent's adapter (the
  ``"stacked"`` scheme's batched matmuls, or peft's mixed batch) and the measurements that chose the default.
- :mod:`llm_marl_trainers.config` — :class:`~llm_marl_trainers.config.TrainerConfig`, every option (TRL's names where
  they exist).
- :mod:`llm_marl_trainers.magrpo` — :class:`~llm_marl_trainers.magrpo.MAGRPOTrainer`: the step (trees, advantages,
  micro-batched update), logging, team-directory output.
- :mod:`llm_marl_trainers.checkpoint` — atomic checkpoints and exact resume; :mod:`llm_marl_trainers.reporting` —
  TensorBoard / W&B.
- :mod:`llm_marl_trainers.critic` — the optional centralized critic: a value head on the frozen base's reading of the
  env's ``state()``, the baseline ``A = R − V(s)`` with ``baseline: critic``.
- :mod:`llm_marl_trainers.distributed` — data parallelism over ``torchrun`` processes (shards of a step's trees,
  gradients summed across ranks, metrics gathered).
- :mod:`llm_marl_trainers.plan` — what one step will generate (nodes, completions, tokens) and a measured estimate of
  its time; :mod:`llm_marl_trainers.trl_adapter` — TRL's ``GRPOTrainer`` on the envs. (``llm-marl train`` is
  :mod:`llm_marl_benchmarks.train`.)

Importing ``trainers`` itself loads nothing heavy; torch comes with the submodules.
"""
