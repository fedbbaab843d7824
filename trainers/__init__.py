"""MAGRPO / GRPO training for the suite's envs (needs the ``train`` extra: torch, transformers, peft).

Modules:

- :mod:`trainers.advantages` — MAGRPO tree returns ``R = r + γ·mean(children R)``, group-relative advantages with
  TRL's ``scale_rewards`` (group / batch / none), the reward metrics (``reward``, ``reward_std``,
  ``frac_reward_zero_std``) and the per-agent advantage ``A_i = R_i − mean_j R_j``. Pure functions on tensors.
- :mod:`trainers.losses` — the policy losses behind one registry (``LOSSES``) and one dispatch (``policy_loss``):
  ``magrpo`` (on-policy REINFORCE), and TRL's ``grpo`` / ``dr_grpo`` / ``dapo`` (clipped ratio, ``beta`` k3 KL); plus
  ``sequence_logprobs`` and ``entropy_from_logits``.

Importing ``trainers`` itself loads nothing heavy; torch comes with the submodules.
"""
