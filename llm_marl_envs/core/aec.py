"""The AEC version of the suite's envs: PettingZoo's ``parallel_to_aec``, with bad actions refused up front.

``env()`` of each versioned module (``writing_v0.env()``) is the parallel env seen one agent at a time, as
``pettingzoo.utils.parallel_to_aec`` builds it (order enforcing included): each live agent acts in turn, and the
turn is played when the last one has. Two actions PettingZoo's wrapper takes badly are refused here before anything
changes, so the env stays usable (the suite's rule for bad input):

* a non-string action: the wrapper would store it and the parallel env would raise only when the turn's last agent
  acts, naming an agent that can no longer act again;
* an action other than ``None`` for a finished agent (PettingZoo's "dead step"): the wrapper drops the agent's
  pending entry, then fails a bare ``assert``, and every later step raises ``KeyError``.

PettingZoo's own ``api_test`` does not apply to these envs: its observation checks assume NumPy arrays (a text
observation has no ``dtype``). ``tests/test_env_api.py`` runs the checks of ``api_test`` that apply to text.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper


class TextParallelToAEC(parallel_to_aec_wrapper):
    """``parallel_to_aec_wrapper`` that checks each action before it is stored (see the module docstring)."""

    def step(self, action: Any) -> None:
        """Act for ``agent_selection``: a string while it is live, ``None`` once it is finished."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise ValueError(f"agent {agent!r} is finished: its only action is None (PettingZoo's dead step), "
                                 f"got {type(action).__name__}")
        elif not isinstance(action, str):
            raise TypeError(f"action of agent {agent!r}: expected str, got {type(action).__name__}")
        super().step(action)


def to_aec(env: ParallelEnv) -> AECEnv:
    """``env`` through the AEC API: what ``pettingzoo.utils.parallel_to_aec`` returns, with the checks above."""
    return OrderEnforcingWrapper(TextParallelToAEC(env))
