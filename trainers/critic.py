"""An optional centralized critic: ``V(s)`` from the env's privileged ``state()``, as MAGRPO's baseline
(``TrainerConfig.baseline = "critic"``).

Centralized training, decentralized execution: the critic reads the whole state — every draft, message, score and
private assessment, which no agent observes — but only the trainer uses it. A saved team acts from each agent's own
observation; the critic lives in the run's checkpoints (``critic.pt``, for resuming), not in the team directory.

- **Input**: ``state_text(state)``, the state as compact JSON with sorted keys (deterministic), of the node's
  position (:attr:`llm_marl_envs.rollout.TreeNode.state`, recorded by the runner with ``record_state=True``).
- **Features**: the team's frozen base model read it — its last hidden state at the text's last token, adapters off,
  no gradient (:meth:`llm_marl_trainers.generation.TeamModel.state_features`). So the critic costs one forward over the
  expanded nodes' states per step and a small trainable head, not a second language model.
- **Head**: ``LayerNorm → Linear(hidden, width) → GELU → Linear(width, 1)``, float32, its own AdamW.
- **Targets and loss**: each expanded node's return under the sampling policy, ``mean_c R(c)``
  (:func:`llm_marl_trainers.advantages.value_targets`); mean squared error over the step's nodes, one optimizer step per
  training step, taken after the advantages were computed with the values from before it.
- **Advantage**: ``A = R(c) − V(s_n)`` for the children ``c`` of node ``n`` (then ``scale_rewards`` as usual): the
  learned baseline takes the place of the mean of the group. The group mean is the better baseline while the critic
  is untrained; a critic pays off where it generalises across positions (few samples per node, long trees).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from llm_marl_trainers.distributed import DataParallel
    from llm_marl_trainers.generation import TeamModel


def state_text(state: Any) -> str:
    """The critic's input text: ``state`` as compact JSON with sorted keys (numpy values as lists, anything else
    JSON does not know as its ``str``)."""
    return json.dumps(state, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


class ValueHead(nn.Module):
    """``LayerNorm → Linear → GELU → Linear``: state features to one value."""

    def __init__(self, hidden_size: int, width: int = 256) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(hidden_size), nn.Linear(hidden_size, width), nn.GELU(),
                                 nn.Linear(width, 1))

    def forward(self, features: Tensor) -> Tensor:
        """``[n, hidden] → [n]``."""
        return self.net(features).squeeze(-1)


class StateCritic:
    """The value head over the team's frozen base features, with its optimizer (see the module docstring)."""

    def __init__(self, team: TeamModel, *, learning_rate: float, max_tokens: int, seed: int) -> None:
        self.team = team
        self.max_tokens = max_tokens
        first = team.model_of(team.agents[0])
        device = next(first.parameters()).device
        with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]):
            torch.manual_seed(seed)  # the same head on every rank and in every run of the seed
            self.head = ValueHead(int(first.config.hidden_size)).to(device)
        self.optimizer = torch.optim.AdamW(self.head.parameters(), lr=learning_rate)

    def features(self, states: Sequence[Any]) -> Tensor:
        """The states' features (no gradient; see :meth:`TeamModel.state_features`)."""
        return self.team.state_features([state_text(state) for state in states], max_tokens=self.max_tokens)

    def values(self, features: Tensor) -> Tensor:
        """``V(s)`` per row, without gradient."""
        with torch.no_grad():
            return self.head(features).double().cpu()

    def update(self, features: Tensor, targets: Sequence[float], parallel: DataParallel, total: int
               ) -> dict[str, float]:
        """One AdamW step on the mean squared error over ``total`` nodes (this rank's ``features`` among them;
        data-parallel ranks sum their gradients). Returns ``critic/loss``, the whole step's error before the step."""
        target = torch.tensor(list(targets), dtype=torch.float32, device=features.device)
        self.optimizer.zero_grad(set_to_none=True)
        squared = (self.head(features) - target).pow(2).sum() / total
        squared.backward()
        loss = parallel.sum(float(squared.item()))
        parallel.sum_gradients(self.head.parameters())
        if all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in self.head.parameters()):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"critic/loss": loss}

    def state_dict(self) -> dict[str, Any]:
        """The head and its optimizer, for checkpoints."""
        return {"head": self.head.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])


__all__ = ["StateCritic", "ValueHead", "state_text"]
