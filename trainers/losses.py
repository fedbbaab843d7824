"""Policy losses: MAGRPO's on-policy REINFORCE and TRL's GRPO family, behind one registry and one dispatch site.

``loss_type`` picks an entry of :data:`LOSSES`; :func:`policy_loss` is the only place that looks it up. Every entry
takes the same :class:`PolicyBatch` (per-token tensors) and :class:`LossSettings` (hyper-parameters) and returns
``(loss, metrics)`` with TRL's metric names. The pieces each loss is made of — the k3 KL estimator, the clipped
surrogate, the normalisations — are small functions of their own, each with a unit test against hand-computed values
(``tests/trainers/test_losses.py``).

Sources (read, not copied):

- TRL 1.16.0 ``trl/trainer/grpo_trainer.py`` ``GRPOTrainer._compute_loss`` (ratio, clipping, KL, normalisations,
  ``clip_ratio/*`` metrics), ``trl/trainer/grpo_config.py`` (``loss_type``, ``epsilon``, ``epsilon_high``, ``beta``)
  and ``trl/trainer/utils.py`` (``selective_log_softmax``, ``entropy_from_logits``).
- MAGRPO: arXiv 2508.04652 and OpenMLRL/CoMLRL ``comlrl/trainers/reinforce/magrpo.py`` at commit
  ``bb779554bac9d6c95a44504184f41d00ac751db1`` (``_compute_loss_with_gradients``, ``_update_from_samples``); the same
  in ``comlrl==1.4.3``.
- GRPO: Shao et al., DeepSeekMath, arXiv 2402.03300; Dr. GRPO: Liu et al., arXiv 2503.20783; DAPO: Yu et al.,
  arXiv 2503.14476; k3 estimator: J. Schulman, "Approximating KL Divergence" (2020).

Shapes: ``B`` completions, ``T`` completion tokens (right-padded); ``completion_mask`` is 1 on real tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from llm_marl_trainers.config import LOSS_TYPES

# --------------------------------------------------------------------------------------------------------------------
# Log-probabilities and entropies from logits
# --------------------------------------------------------------------------------------------------------------------


def completion_logits(logits: Tensor, completion_length: int, temperature: float = 1.0) -> Tensor:
    """The logits that predict the last ``completion_length`` tokens: ``logits[:, -T-1:-1] / temperature``.

    A causal LM's logits at position t predict token t+1, so the completion's T tokens are predicted by the T
    positions before the last. Works on full logits ``[B, L, V]`` and on TRL-style ``logits_to_keep = T + 1`` logits.
    The temperature is the sampling temperature, so log-probabilities are those of the distribution sampled from
    (TRL ``selective_log_softmax(logits, ids, temperature)``).
    """
    if temperature <= 0:
        raise ValueError(f"temperature: expected > 0, got {temperature!r}")
    if logits.ndim != 3 or logits.shape[1] < completion_length + 1:
        raise ValueError(
            f"logits: expected [B, L, V] with L >= completion_length + 1 = {completion_length + 1}, "
            f"got shape {tuple(logits.shape)}"
        )
    shifted = logits[:, -completion_length - 1 : -1]
    return shifted / temperature if temperature != 1.0 else shifted


def sequence_logprobs(logits: Tensor, input_ids: Tensor, completion_mask: Tensor, temperature: float = 1.0) -> Tensor:
    """Per-token log-probabilities of the completion tokens, ``[B, T]``, 0 where ``completion_mask`` is 0.

    ``log π(y_t | x, y_<t) = log_softmax(logits_{t−1} / temperature)[y_t]`` with ``y`` the last ``T`` tokens of
    ``input_ids`` (prompt + completion, completion right-padded) and ``T = completion_mask.shape[1]``
    (TRL ``_get_per_token_logps_and_entropies`` + ``selective_log_softmax``).
    """
    if input_ids.ndim != 2 or completion_mask.ndim != 2 or completion_mask.shape[0] != input_ids.shape[0]:
        raise ValueError(
            f"input_ids, completion_mask: expected [B, L] and [B, T], got {tuple(input_ids.shape)} and "
            f"{tuple(completion_mask.shape)}"
        )
    T = completion_mask.shape[1]
    completion_ids = input_ids[:, -T:] if T else input_ids[:, :0]
    return token_logprobs(completion_logits(logits, T, temperature), completion_ids, completion_mask)


def token_logprobs(predicting_logits: Tensor, completion_ids: Tensor, completion_mask: Tensor) -> Tensor:
    """``log_softmax(predicting_logits)[y_t]`` per token, ``[B, T]``, 0 where ``completion_mask`` is 0, for logits
    already aligned with the tokens they predict (``predicting_logits[:, t]`` predicts ``completion_ids[:, t]``, with
    any temperature applied): the last step of :func:`sequence_logprobs`, and what a shared-prefix forward, whose
    first token is predicted by its prompt's last position, computes directly."""
    logps = predicting_logits.log_softmax(dim=-1)
    per_token_logps = logps.gather(dim=-1, index=completion_ids.unsqueeze(-1)).squeeze(-1)
    return per_token_logps * completion_mask.to(per_token_logps.dtype)


def entropy_from_logits(logits: Tensor, chunk_size: int = 128) -> Tensor:
    """Shannon entropy in nats of each row of ``logits``: ``H = −Σ_v p_v log p_v``, shape ``logits.shape[:-1]``.

    Computed ``chunk_size`` rows at a time so the full softmax is never held at once (TRL ``entropy_from_logits``).
    For the completion tokens: ``entropy_from_logits(completion_logits(logits, T, temperature))``.
    """
    flat_logits = logits.reshape(-1, logits.shape[-1])
    entropies = []
    for chunk in flat_logits.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)
        entropies.append(-(logps.exp() * logps).sum(dim=-1))
    if not entropies:
        return logits.new_zeros(logits.shape[:-1])
    return torch.cat(entropies).reshape(logits.shape[:-1])


# --------------------------------------------------------------------------------------------------------------------
# Inputs and settings
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyBatch:
    """The per-token tensors of one (micro-)batch of completions."""

    per_token_logps: Tensor
    """``[B, T]`` log π_θ(y_t | ·) under the current policy, with gradient."""
    advantages: Tensor
    """``[B]`` one advantage per completion (``[B, T]`` per-token advantages are accepted too, as in TRL)."""
    completion_mask: Tensor
    """``[B, T]`` 1 on completion tokens, 0 on padding."""
    old_per_token_logps: Tensor | None = None
    """``[B, T]`` log π_θold of the policy that sampled the batch; ``None`` means on-policy: the current log-probs
    detached, so the ratio is 1 with the gradient of log π (TRL, when ``num_iterations == 1``)."""
    ref_per_token_logps: Tensor | None = None
    """``[B, T]`` log π_ref of the reference policy (for LoRA: the base with adapters disabled); needed when
    ``beta != 0``; when given, ``kl`` is reported even at ``beta == 0``."""
    entropies: Tensor | None = None
    """``[B, T]`` per-token entropies (:func:`entropy_from_logits`); only reported, as ``entropy``."""
    num_items_in_batch: int | float | Tensor | None = None
    """``dapo`` only: active tokens in every micro-batch whose gradients are accumulated into one optimizer step
    (TRL's ``num_items_in_batch``); ``None`` means this batch's own count, ``completion_mask.sum()``."""

    def __post_init__(self) -> None:
        shape = tuple(self.per_token_logps.shape)
        if self.per_token_logps.ndim != 2:
            raise ValueError(f"per_token_logps: expected [B, T], got shape {shape}")
        for name in ("completion_mask", "old_per_token_logps", "ref_per_token_logps", "entropies"):
            value = getattr(self, name)
            if value is not None and tuple(value.shape) != shape:
                raise ValueError(f"{name}: expected shape {shape} like per_token_logps, got {tuple(value.shape)}")
        if tuple(self.advantages.shape) not in ((shape[0],), shape):
            raise ValueError(f"advantages: expected shape ({shape[0]},) or {shape}, got {tuple(self.advantages.shape)}")


@dataclass(frozen=True)
class LossSettings:
    """Which loss, and its hyper-parameters (TRL ``GRPOConfig`` names)."""

    loss_type: str = "magrpo"
    """One of :data:`LOSSES`: ``magrpo`` (on-policy REINFORCE, MAGRPO), ``grpo``, ``dr_grpo`` or ``dapo`` (TRL)."""
    epsilon: float = 0.2
    """Lower clipping bound: the ratio is clipped below at ``1 − epsilon`` (TRL ``epsilon``; not used by magrpo)."""
    epsilon_high: float | None = None
    """Upper clipping bound ``1 + epsilon_high``; ``None`` means ``epsilon`` (DAPO recommends 0.28)."""
    beta: float = 0.0
    """KL coefficient: ``beta · KL_k3(π_θ ‖ π_ref)`` is added per token; 0 needs no reference log-probs."""
    max_completion_length: int | None = None
    """``dr_grpo`` only: the constant the summed loss is divided by per completion (TRL ``max_completion_length``)."""

    def __post_init__(self) -> None:
        if self.loss_type not in LOSSES:
            raise ValueError(f"loss_type: expected one of {tuple(LOSSES)}, got {self.loss_type!r}")
        if self.epsilon < 0 or (self.epsilon_high is not None and self.epsilon_high < 0):
            raise ValueError(f"epsilon, epsilon_high: expected >= 0, got {self.epsilon!r}, {self.epsilon_high!r}")
        if self.beta < 0:
            raise ValueError(f"beta: expected >= 0, got {self.beta!r}")
        if self.loss_type == "dr_grpo" and (self.max_completion_length is None or self.max_completion_length < 1):
            raise ValueError(
                f"max_completion_length: loss_type='dr_grpo' divides by it, expected an int >= 1, "
                f"got {self.max_completion_length!r}"
            )

    @property
    def clip_epsilons(self) -> tuple[float, float]:
        """``(ε_low, ε_high)`` in use: ``epsilon`` and ``epsilon_high`` or, when that is ``None``, ``epsilon``
        (TRL ``GRPOTrainer.__init__``: ``self.epsilon_low = args.epsilon``; ``self.epsilon_high = args.epsilon_high
        if args.epsilon_high is not None else args.epsilon``)."""
        return self.epsilon, self.epsilon if self.epsilon_high is None else self.epsilon_high


# --------------------------------------------------------------------------------------------------------------------
# The pieces
# --------------------------------------------------------------------------------------------------------------------


def per_token_kl(per_token_logps: Tensor, ref_per_token_logps: Tensor) -> Tensor:
    """The k3 estimator of KL(π_θ ‖ π_ref) per token: ``exp(ref − logp) − (ref − logp) − 1`` (≥ 0, 0 iff equal).

    Source: TRL ``_compute_loss`` (``per_token_kl``); Schulman (2020), "Approximating KL Divergence".
    """
    ref_minus_logp = ref_per_token_logps - per_token_logps
    return torch.exp(ref_minus_logp) - ref_minus_logp - 1


def clipped_surrogate(
    per_token_logps: Tensor, old_per_token_logps: Tensor, advantages: Tensor, epsilon_low: float, epsilon_high: float
) -> tuple[Tensor, Tensor]:
    """PPO's clipped per-token objective, as a loss: ``−min(ratio · A, clip(ratio, 1 − ε_low, 1 + ε_high) · A)``.

    ``ratio = exp(logp − old_logp)``; returns ``(per_token_loss, ratio)``, both ``[B, T]``. ``advantages`` ``[B]`` is
    broadcast over tokens. Source: TRL ``_compute_loss`` (``coef_1``, ``coef_2``, ``per_token_loss``).
    """
    A = advantages.unsqueeze(1) if advantages.ndim == 1 else advantages
    ratio = torch.exp(per_token_logps - old_per_token_logps)
    clipped_ratio = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    per_token_loss = -torch.min(ratio * A, clipped_ratio * A)
    return per_token_loss, ratio


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """``Σ x·mask / max(Σ mask, 1)`` over every token of the batch (TRL's ``global_masked_mean``, one process)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def clip_ratio_metrics(
    ratio: Tensor, advantages: Tensor, mask: Tensor, epsilon_low: float, epsilon_high: float
) -> dict[str, float]:
    """How often clipping bit, under TRL's names (``_compute_loss``, "Compute the clipped probability ratios").

    A token is *low-clipped* when ``ratio < 1 − ε_low`` and ``A < 0``, *high-clipped* when ``ratio > 1 + ε_high`` and
    ``A > 0`` (strict: exactly at the bound nothing is clipped); ``region`` is either. ``*_mean`` are token fractions
    over the batch; ``low_min`` / ``high_max`` the extreme per-completion fractions.
    """
    A = advantages.unsqueeze(1) if advantages.ndim == 1 else advantages
    mask = mask.to(ratio.dtype)
    is_low_clipped = ((ratio < 1 - epsilon_low) & (A < 0)).to(ratio.dtype)
    is_high_clipped = ((ratio > 1 + epsilon_high) & (A > 0)).to(ratio.dtype)
    is_region_clipped = torch.maximum(is_low_clipped, is_high_clipped)

    def per_sequence(x: Tensor) -> Tensor:
        return (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)

    return {
        "clip_ratio/low_mean": masked_mean(is_low_clipped, mask).item(),
        "clip_ratio/high_mean": masked_mean(is_high_clipped, mask).item(),
        "clip_ratio/region_mean": masked_mean(is_region_clipped, mask).item(),
        "clip_ratio/low_min": per_sequence(is_low_clipped).min().item(),
        "clip_ratio/high_max": per_sequence(is_high_clipped).max().item(),
    }


def sequence_mean_then_batch_mean(per_token_loss: Tensor, mask: Tensor) -> Tensor:
    """``grpo``: ``mean_i ( Σ_t l_it m_it / Σ_t m_it )`` — each completion's token mean, then the mean over completions
    (TRL ``loss_type == "grpo"``; DeepSeekMath's 1/|o_i| normalisation, which favours short positive and long negative
    completions)."""
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def sum_over_batch_times_max_length(per_token_loss: Tensor, mask: Tensor, max_completion_length: int) -> Tensor:
    """``dr_grpo``: ``Σ_it l_it m_it / (B · max_completion_length)`` — a constant normaliser, no length bias
    (TRL ``loss_type == "dr_grpo"``: ``per_token_loss.size(0) * self.max_completion_length``)."""
    return (per_token_loss * mask).sum() / (per_token_loss.shape[0] * max_completion_length)


def sum_over_active_tokens(
    per_token_loss: Tensor, mask: Tensor, num_items_in_batch: int | float | Tensor | None = None
) -> Tensor:
    """``dapo``: ``Σ_it l_it m_it / num_items_in_batch`` — token-level mean over the whole accumulated batch
    (TRL ``loss_type == "dapo"``; DAPO's token-level policy gradient loss). With ``num_items_in_batch = None`` it is
    this batch's token mean ``Σ l m / Σ m``."""
    total = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
    return (per_token_loss * mask).sum() / total.clamp(min=1.0)


def sequence_sum_then_batch_mean(per_token_loss: Tensor, mask: Tensor) -> Tensor:
    """``magrpo``: ``mean_i Σ_t l_it m_it`` — each completion's summed loss, then the mean over completions.

    Source: CoMLRL ``_compute_loss_with_gradients``: ``sequence_log_prob = torch.stack(log_probs).sum()``,
    ``loss = -sequence_log_prob * advantage``, ``total_loss / num_samples``; ``_update_from_samples`` then averages
    over the nodes of a batch (``loss * 1/len(batch)``), which is the same mean when every node has G completions.
    """
    return (per_token_loss * mask).sum(-1).mean()


# --------------------------------------------------------------------------------------------------------------------
# The losses
# --------------------------------------------------------------------------------------------------------------------


def _kl_term(batch: PolicyBatch, settings: LossSettings, metrics: dict[str, float]) -> Tensor | None:
    """``β · KL_k3`` per token (``None`` when β = 0), and the ``kl`` metric whenever reference log-probs are given."""
    if batch.ref_per_token_logps is None:
        if settings.beta != 0.0:
            raise ValueError(f"ref_per_token_logps: beta={settings.beta} needs the reference log-probs, got None")
        return None
    kl = per_token_kl(batch.per_token_logps, batch.ref_per_token_logps)
    metrics["kl"] = masked_mean(kl.detach(), batch.completion_mask.to(kl.dtype)).item()
    return settings.beta * kl if settings.beta != 0.0 else None


def _entropy_metric(batch: PolicyBatch, metrics: dict[str, float]) -> None:
    if batch.entropies is not None:
        mask = batch.completion_mask.to(batch.entropies.dtype)
        metrics["entropy"] = masked_mean(batch.entropies.detach(), mask).item()


def _clipped_per_token_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """The per-token loss shared by grpo / dr_grpo / dapo: clipped surrogate + ``β · KL``, and its metrics."""
    old_per_token_logps = (
        batch.per_token_logps.detach() if batch.old_per_token_logps is None else batch.old_per_token_logps
    )
    eps_low, eps_high = settings.clip_epsilons
    per_token_loss, ratio = clipped_surrogate(
        batch.per_token_logps, old_per_token_logps, batch.advantages, eps_low, eps_high
    )
    metrics = clip_ratio_metrics(ratio.detach(), batch.advantages, batch.completion_mask, eps_low, eps_high)
    kl_term = _kl_term(batch, settings, metrics)
    if kl_term is not None:
        per_token_loss = per_token_loss + kl_term
    _entropy_metric(batch, metrics)
    return per_token_loss, metrics


def magrpo_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """MAGRPO: ``L = −mean_i ( A_i · Σ_t log π_θ(y_it | ·) )`` — on-policy REINFORCE with the group baseline in ``A``;
    no ratio, no clipping, and KL only if ``beta > 0`` (then ``+ β · Σ_t KL_k3`` per completion).

    Source: arXiv 2508.04652 (Algorithm 1); CoMLRL ``_compute_loss_with_gradients`` (see
    :func:`sequence_sum_then_batch_mean`). On-policy by construction, so ``old_per_token_logps`` must be ``None``.
    """
    if batch.old_per_token_logps is not None:
        raise ValueError(
            "old_per_token_logps: loss_type='magrpo' is on-policy (no ratio), expected None; "
            "use 'grpo', 'dr_grpo' or 'dapo' for several updates per batch"
        )
    A = batch.advantages.unsqueeze(1) if batch.advantages.ndim == 1 else batch.advantages
    per_token_loss = -A * batch.per_token_logps
    metrics: dict[str, float] = {}
    kl_term = _kl_term(batch, settings, metrics)
    if kl_term is not None:
        per_token_loss = per_token_loss + kl_term
    _entropy_metric(batch, metrics)
    mask = batch.completion_mask.to(per_token_loss.dtype)
    return sequence_sum_then_batch_mean(per_token_loss, mask), metrics


def grpo_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """GRPO (TRL ``loss_type="grpo"``): clipped surrogate + ``β·KL``, token mean per completion, mean over
    completions (:func:`sequence_mean_then_batch_mean`). Source: TRL ``_compute_loss``; arXiv 2402.03300."""
    per_token_loss, metrics = _clipped_per_token_loss(batch, settings)
    mask = batch.completion_mask.to(per_token_loss.dtype)
    return sequence_mean_then_batch_mean(per_token_loss, mask), metrics


def dr_grpo_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """Dr. GRPO (TRL ``loss_type="dr_grpo"``): same per-token loss, summed and divided by ``B ·
    max_completion_length`` (:func:`sum_over_batch_times_max_length`). Source: TRL ``_compute_loss``; arXiv
    2503.20783."""
    per_token_loss, metrics = _clipped_per_token_loss(batch, settings)
    mask = batch.completion_mask.to(per_token_loss.dtype)
    assert settings.max_completion_length is not None  # LossSettings checks it for dr_grpo
    return sum_over_batch_times_max_length(per_token_loss, mask, settings.max_completion_length), metrics


def dapo_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """DAPO (TRL ``loss_type="dapo"``, TRL's default): same per-token loss, summed and divided by the active tokens
    of the accumulated batch (:func:`sum_over_active_tokens`). Source: TRL ``_compute_loss``; arXiv 2503.14476."""
    per_token_loss, metrics = _clipped_per_token_loss(batch, settings)
    mask = batch.completion_mask.to(per_token_loss.dtype)
    return sum_over_active_tokens(per_token_loss, mask, batch.num_items_in_batch), metrics


LossFn = Callable[[PolicyBatch, LossSettings], tuple[Tensor, dict[str, float]]]
LOSSES: dict[str, LossFn] = {loss_type: globals()[f"{loss_type}_loss"] for loss_type in LOSS_TYPES}
"""``loss_type`` → its loss, the function named ``<loss_type>_loss``. The names are
:data:`llm_marl_trainers.config.LOSS_TYPES` (the one list, torch-free so a config is checked before torch loads); a
name there without its function here fails at import."""


def policy_loss(batch: PolicyBatch, settings: LossSettings) -> tuple[Tensor, dict[str, float]]:
    """The loss ``settings.loss_type`` names, on ``batch``: ``(scalar loss, metrics)`` — the one dispatch site.

    The returned loss is for this (micro-)batch: ``grpo``, ``dr_grpo`` and ``magrpo`` are means over its completions
    (divide by the number of accumulated micro-batches, as TRL does); ``dapo`` is already normalised by
    ``batch.num_items_in_batch`` when that counts the tokens of every accumulated micro-batch.
    """
    try:
        loss_fn = LOSSES[settings.loss_type]
    except KeyError:
        raise ValueError(f"loss_type: expected one of {tuple(LOSSES)}, got {settings.loss_type!r}") from None
    return loss_fn(batch, settings)
