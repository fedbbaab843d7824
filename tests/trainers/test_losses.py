"""Policy losses against values computed by hand (``trainers/losses.py``)."""

from __future__ import annotations

import math

import pytest
import torch

from llm_marl_trainers.losses import (
    LOSSES,
    LossSettings,
    PolicyBatch,
    clip_ratio_metrics,
    clipped_surrogate,
    entropy_from_logits,
    per_token_kl,
    policy_loss,
    sequence_logprobs,
    sequence_mean_then_batch_mean,
    sequence_sum_then_batch_mean,
    sum_over_active_tokens,
    sum_over_batch_times_max_length,
)

LN2 = math.log(2.0)

# two completions of 3 and 1 tokens; the padded positions hold garbage that must not count
PER_TOKEN_LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
RAGGED_MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


def test_registry_is_the_one_list_of_loss_types() -> None:
    assert set(LOSSES) == {"magrpo", "grpo", "dr_grpo", "dapo"}


def test_unknown_loss_type_and_missing_settings_are_refused() -> None:
    with pytest.raises(
        ValueError, match=r"loss_type: expected one of \('magrpo', 'grpo', 'dr_grpo', 'dapo'\), got 'ppo'"
    ):
        LossSettings(loss_type="ppo")
    with pytest.raises(ValueError, match=r"max_completion_length: loss_type='dr_grpo' divides by it"):
        LossSettings(loss_type="dr_grpo")


# --- log-probabilities and entropies -------------------------------------------------------------------------------


def toy_logits() -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt [0, 1], completion [2, 1]; logits at 1 predict token 2, at 2 predict token 1; 0 and 3 are ignored."""
    logits = torch.tensor([[[9.0, -9.0, 5.0], [0.0, LN2, 0.0], [0.0, 0.0, 0.0], [50.0, -50.0, 7.0]]])  # [1, 4, 3]
    input_ids = torch.tensor([[0, 1, 2, 1]])
    return logits, input_ids


def test_sequence_logprobs_shift_by_one_and_mask() -> None:
    logits, input_ids = toy_logits()
    # position 1: probs (1/4, 2/4, 1/4) -> log p(2) = ln 1/4; position 2: uniform -> log p(1) = ln 1/3
    full = sequence_logprobs(logits, input_ids, torch.tensor([[1, 1]]))
    assert torch.allclose(full, torch.tensor([[math.log(1 / 4), math.log(1 / 3)]]))
    padded = sequence_logprobs(logits, input_ids, torch.tensor([[1, 0]]))
    assert torch.allclose(padded, torch.tensor([[math.log(1 / 4), 0.0]]))


def test_sequence_logprobs_divide_by_the_sampling_temperature() -> None:
    logits, input_ids = toy_logits()
    # position 1 at T=2: logits (0, ln2/2, 0) -> probs (1, √2, 1)/(2 + √2) -> log p(2) = −ln(2 + √2)
    logps = sequence_logprobs(logits, input_ids, torch.tensor([[1, 1]]), temperature=2.0)
    assert logps[0, 0].item() == pytest.approx(-math.log(2 + math.sqrt(2)))


def test_sequence_logprobs_accept_logits_to_keep() -> None:
    logits, input_ids = toy_logits()
    kept = logits[:, -3:]  # TRL's logits_to_keep = T + 1
    assert torch.equal(
        sequence_logprobs(kept, input_ids, torch.ones(1, 2)), sequence_logprobs(logits, input_ids, torch.ones(1, 2))
    )


def test_entropy_from_logits() -> None:
    logits = torch.tensor([[0.0, 0.0, 0.0], [0.0, LN2, 0.0]])
    # uniform over 3: ln 3; (1/4, 1/2, 1/4): −(2·¼ ln ¼ + ½ ln ½) = 1.5 ln 2
    expected = torch.tensor([math.log(3), 1.5 * LN2])
    assert torch.allclose(entropy_from_logits(logits), expected)
    assert torch.allclose(entropy_from_logits(logits, chunk_size=1), expected)


# --- the pieces -----------------------------------------------------------------------------------------------------


def test_k3_kl_by_hand_and_zero_when_equal() -> None:
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    # exp(ln ½) − ln ½ − 1 = ½ + ln 2 − 1
    assert per_token_kl(logp, ref).item() == pytest.approx(0.5 + LN2 - 1)
    x = torch.tensor([[-0.3, -2.0, -7.5]])
    assert torch.equal(per_token_kl(x, x), torch.zeros_like(x))


def test_clipped_surrogate_by_hand() -> None:
    ratio = torch.tensor([[1.5, 1.5, 0.5, 0.5]])
    A = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    loss, r = clipped_surrogate(ratio.log(), torch.zeros_like(ratio), A, 0.2, 0.2)
    # −min(1.5, 1.2) = −1.2; −min(−1.5, −1.2) = 1.5; −min(0.5, 0.8) = −0.5; −min(−0.5, −0.8) = 0.8
    assert torch.allclose(loss, torch.tensor([[-1.2, 1.5, -0.5, 0.8]]))
    assert torch.allclose(r, ratio)


@pytest.mark.parametrize(
    ("ratio", "advantage", "clipped"),
    [
        (1.2 - 1e-3, 1.0, False),
        (1.2 + 1e-3, 1.0, True),
        (0.8 + 1e-3, -1.0, False),
        (0.8 - 1e-3, -1.0, True),
        (0.8 - 1e-3, 1.0, False),  # below the band with A > 0: the pessimistic min keeps the unclipped term
        (1.2 + 1e-3, -1.0, False),  # above the band with A < 0: likewise
    ],
)
def test_clipping_engages_exactly_past_one_plus_minus_epsilon(ratio: float, advantage: float, clipped: bool) -> None:
    logp = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss, _ = clipped_surrogate(logp, torch.zeros(1, 1), torch.tensor([advantage]), 0.2, 0.2)
    loss.sum().backward()
    # d(−ratio·A)/d logp = −ratio·A when unclipped; 0 when the clipped constant wins
    expected_grad = 0.0 if clipped else -ratio * advantage
    assert logp.grad is not None and logp.grad.item() == pytest.approx(expected_grad)
    metrics = clip_ratio_metrics(logp.detach().exp(), torch.tensor([advantage]), torch.ones(1, 1), 0.2, 0.2)
    assert metrics["clip_ratio/region_mean"] == (1.0 if clipped else 0.0)


def test_asymmetric_epsilon_high() -> None:
    ratio = torch.tensor([[1.25, 0.79]])
    loss, _ = clipped_surrogate(ratio.log(), torch.zeros(1, 2), torch.tensor([[1.0, -1.0]]), 0.2, 0.28)
    # 1.25 < 1.28: not clipped -> −1.25; 0.79 < 0.8 with A < 0: clipped -> −min(−0.79, −0.8) = 0.8
    assert torch.allclose(loss, torch.tensor([[-1.25, 0.8]]))


def test_clip_ratio_metrics_by_hand() -> None:
    ratio = torch.tensor([[1.5, 0.5, 1.0], [0.5, 1.5, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    metrics = clip_ratio_metrics(ratio, torch.tensor([1.0, -1.0]), mask, 0.2, 0.2)
    # completion 0 (A > 0): high-clipped [1, 0, 0]; completion 1 (A < 0): low-clipped [1, 0, (masked)]
    assert metrics == pytest.approx(
        {
            "clip_ratio/low_mean": 1 / 5,
            "clip_ratio/high_mean": 1 / 5,
            "clip_ratio/region_mean": 2 / 5,
            "clip_ratio/low_min": 0.0,
            "clip_ratio/high_max": 1 / 3,
        }
    )


def test_normalisations_by_hand_on_a_ragged_mask() -> None:
    # grpo: token means 2 and 4 -> 3
    assert sequence_mean_then_batch_mean(PER_TOKEN_LOSS, RAGGED_MASK).item() == pytest.approx(3.0)
    # dr_grpo: (1+2+3+4) / (2 · 4)
    assert sum_over_batch_times_max_length(PER_TOKEN_LOSS, RAGGED_MASK, 4).item() == pytest.approx(1.25)
    # dapo: 10 / 4 active tokens; or / 8 tokens of the whole accumulated batch
    assert sum_over_active_tokens(PER_TOKEN_LOSS, RAGGED_MASK).item() == pytest.approx(2.5)
    assert sum_over_active_tokens(PER_TOKEN_LOSS, RAGGED_MASK, 8).item() == pytest.approx(1.25)
    # magrpo: sequence sums 6 and 4 -> 5
    assert sequence_sum_then_batch_mean(PER_TOKEN_LOSS, RAGGED_MASK).item() == pytest.approx(5.0)


# --- the losses -----------------------------------------------------------------------------------------------------


def ragged_batch(**overrides: object) -> PolicyBatch:
    logps = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -5.0, -5.0]], requires_grad=True)
    fields: dict[str, object] = {
        "per_token_logps": logps,
        "advantages": torch.tensor([2.0, -1.0]),
        "completion_mask": RAGGED_MASK,
    }
    fields.update(overrides)
    return PolicyBatch(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("loss_type", "expected_loss", "expected_grad"),
    [
        # on-policy: ratio = 1, per-token loss = −A, d/dlogp = −A (then the normaliser's weight)
        # grpo: (−2 + 1)/2; tokens of completion 0 weigh 1/(3·2), the single token of completion 1 weighs 1/(1·2)
        ("grpo", -0.5, [[-1 / 3, -1 / 3, -1 / 3], [0.5, 0.0, 0.0]]),
        # dr_grpo, L = 4: (−2·3 + 1)/(2·4); every token weighs 1/8
        ("dr_grpo", -5 / 8, [[-0.25, -0.25, -0.25], [0.125, 0.0, 0.0]]),
        # dapo: (−6 + 1)/4 active tokens; every token weighs 1/4
        ("dapo", -5 / 4, [[-0.5, -0.5, -0.5], [0.25, 0.0, 0.0]]),
        # magrpo: −mean(A · Σ logp) = −(2·(−3) + (−1)·(−2))/2 = 2; every token weighs −A/2
        ("magrpo", 2.0, [[-1.0, -1.0, -1.0], [0.5, 0.0, 0.0]]),
    ],
)
def test_each_loss_type_by_hand(loss_type: str, expected_loss: float, expected_grad: list[list[float]]) -> None:
    batch = ragged_batch()
    loss, metrics = policy_loss(batch, LossSettings(loss_type=loss_type, max_completion_length=4))
    assert loss.item() == pytest.approx(expected_loss)
    loss.backward()
    assert torch.allclose(batch.per_token_logps.grad, torch.tensor(expected_grad))
    if loss_type != "magrpo":
        assert metrics["clip_ratio/region_mean"] == 0.0  # on-policy: the ratio is 1, nothing clips


def test_grpo_and_dr_grpo_agree_up_to_a_constant_on_equal_lengths_only() -> None:
    full = torch.ones(2, 3)
    settings = {t: LossSettings(loss_type=t, max_completion_length=3) for t in ("grpo", "dr_grpo", "dapo")}
    same = {t: policy_loss(ragged_batch(completion_mask=full), s)[0].item() for t, s in settings.items()}
    assert same["grpo"] == pytest.approx(same["dr_grpo"]) == pytest.approx(same["dapo"])  # L = T, equal lengths
    ragged = {t: policy_loss(ragged_batch(), s)[0].item() for t, s in settings.items()}
    assert ragged["grpo"] != pytest.approx(ragged["dr_grpo"])  # -0.5 vs -5/6: grpo up-weights the short completion


def test_off_policy_ratio_and_clipping_in_the_loss() -> None:
    logps = torch.log(torch.tensor([[1.5, 1.0]]))
    batch = PolicyBatch(logps, torch.tensor([1.0]), torch.ones(1, 2), old_per_token_logps=torch.zeros(1, 2))
    loss, metrics = policy_loss(batch, LossSettings(loss_type="grpo"))
    # tokens: −min(1.5, 1.2) = −1.2 and −1; token mean −1.1
    assert loss.item() == pytest.approx(-1.1)
    assert metrics["clip_ratio/high_mean"] == 0.5


def test_kl_is_zero_when_the_reference_is_the_policy_and_added_with_beta() -> None:
    base, _ = policy_loss(ragged_batch(), LossSettings(loss_type="grpo"))
    batch = ragged_batch()
    same, metrics = policy_loss(
        ragged_batch(ref_per_token_logps=batch.per_token_logps.detach()), LossSettings(loss_type="grpo", beta=0.1)
    )
    assert metrics["kl"] == 0.0
    assert same.item() == pytest.approx(base.item())
    # reference one nat of log-prob below everywhere: k3 = e^{−1} + 1 − 1 = e^{−1} per token
    shifted = batch.per_token_logps.detach() - 1.0
    loss, metrics = policy_loss(ragged_batch(ref_per_token_logps=shifted), LossSettings(loss_type="grpo", beta=0.1))
    assert metrics["kl"] == pytest.approx(math.exp(-1))
    assert loss.item() == pytest.approx(base.item() + 0.1 * math.exp(-1))


def test_beta_without_reference_and_magrpo_with_old_logps_are_refused() -> None:
    with pytest.raises(ValueError, match=r"ref_per_token_logps: beta=0.1 needs the reference log-probs, got None"):
        policy_loss(ragged_batch(), LossSettings(loss_type="dapo", beta=0.1))
    with pytest.raises(ValueError, match=r"loss_type='magrpo' is on-policy \(no ratio\), expected None"):
        policy_loss(ragged_batch(old_per_token_logps=torch.zeros(2, 3)), LossSettings(loss_type="magrpo"))


def test_entropy_metric_is_the_masked_token_mean() -> None:
    entropies = torch.tensor([[1.0, 2.0, 3.0], [6.0, 99.0, 99.0]])
    _, metrics = policy_loss(ragged_batch(entropies=entropies), LossSettings(loss_type="magrpo"))
    assert metrics["entropy"] == pytest.approx(3.0)  # (1 + 2 + 3 + 6)/4


def test_batch_shapes_are_checked() -> None:
    with pytest.raises(
        ValueError, match=r"completion_mask: expected shape \(2, 3\) like per_token_logps, got \(2, 2\)"
    ):
        ragged_batch(completion_mask=torch.ones(2, 2))


@pytest.mark.parametrize("loss_type", sorted(LOSSES))
def test_one_sgd_step_raises_the_positive_sample_and_lowers_the_negative_one(loss_type: str) -> None:
    """A 2-parameter categorical policy over 3 tokens (logits θ0, θ1, 0); completion 0 is token 0 with A = +1,
    completion 1 is token 1 with A = −1. One SGD step must raise log π(0) and lower log π(1)."""
    theta = torch.zeros(2, requires_grad=True)

    def logps() -> torch.Tensor:
        token_logits = torch.cat([theta, torch.zeros(1)])  # [3]
        logits = token_logits.expand(2, 2, 3)  # [B=2, L=2 (prompt + 1 token), V=3]
        input_ids = torch.tensor([[2, 0], [2, 1]])
        return sequence_logprobs(logits, input_ids, torch.ones(2, 1))

    before = logps().detach()
    batch = PolicyBatch(logps(), torch.tensor([1.0, -1.0]), torch.ones(2, 1))
    loss, _ = policy_loss(batch, LossSettings(loss_type=loss_type, max_completion_length=1))
    loss.backward()
    with torch.no_grad():  # one plain SGD step, θ ← θ − lr·∇L (torch.optim's first use costs a second of imports)
        theta -= 0.5 * theta.grad
    after = logps().detach()
    assert after[0, 0] > before[0, 0]
    assert after[1, 0] < before[1, 0]
