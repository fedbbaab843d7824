"""Per-row LoRA routing: how the rows of one batch each run under their own agent's adapter (``scheme``).

:class:`llm_marl_trainers.generation.TeamModel` builds one :class:`AdapterRouter` per peft model, and with the
``"stacked"`` scheme (the default) :func:`install_router` gives every LoRA linear layer the routed forward;
``router.routed(agent_of_row)`` then routes the next forward passes' rows.

``"stacked"`` (the default) replaces the forward of every LoRA linear layer, while a batch is routed, by
``base(x) + bmm(bmm(x, A[row]), B[row] · scaling)``: the adapters' matrices are stacked and gathered per row once per
``generate`` call, then two batched matmuls per layer and step, whatever the number of agents. ``"peft"`` is peft's
own mixed-adapter batch (``adapter_names=[...]``): every layer splits its input into one sub-batch per adapter, with
index lists rebuilt in Python at every layer and step. Both make one ``generate`` call and both compute each row under
its own adapter (the tests check logits and log-probabilities against one ``set_adapter`` run per adapter to 1e-5 in
fp32; on SmolLM2 the largest logit difference is 1e-4 on logits of magnitude ~20, float summation order).

``benchmarks/adapter_generation.py`` measured them against the plain base model and the two multi-call schemes
(``set_adapter`` per agent; one merged copy per agent): SmolLM2-135M fp32 on the 2-core CPU, sampled, 64 new tokens
pinned (min = max), medians of wall time (the machine was shared; CPU-time ratios agree within 0.07):

    ========================  ==========  =========  ==========  ===========  ========
    agents × rows per agent   base        stacked    peft        set_adapter  merged
    ========================  ==========  =========  ==========  ===========  ========
    2 × 4 (5 repeats)         7.88 s      1.08 ×     1.13 ×      2.06 ×       1.79 ×
    4 × 4 (3 repeats)         12.79 s     1.10 ×     1.29 ×      2.58 ×       2.21 ×
    ========================  ==========  =========  ==========  ===========  ========

    python benchmarks/adapter_generation.py --model default --agents 2 --rows-per-agent 4 --new-tokens 64
    python benchmarks/adapter_generation.py --model default --agents 4 --rows-per-agent 4 --new-tokens 64 --repeats 3

``"stacked"`` is therefore the default: within 10 % of the base model, and its cost does not grow with the number of
agents, while peft's mixed batch pays its sub-batching per adapter (+13 % at 2 agents, +29 % at 4) and the multi-call
schemes pay ``generate``'s per-call cost once per agent. Not measured here: a GPU, where ``generate`` is launch-bound
and unmerged peft LoRA doubled ``generate`` time for a 1.4B model (FACTS); ``"stacked"`` launches a fixed handful of
kernels per layer for any number of agents, peft's mixed batch a handful per adapter.
:meth:`~llm_marl_trainers.generation.TeamModel.generate` end to end (chat rendering, records, log-probabilities)
measured 1.08 × and 1.04 × the base in the same runs: no measurable cost over ``"stacked"`` alone. ``"stacked"``
supports plain LoRA on linear layers (no DoRA or other variants, no LoRA bias); anything else needs
``scheme="peft"``.

Training notes (peft 0.21): peft refuses ``adapter_names=`` in train mode, and ``set_adapter`` / ``disable_adapter``
freeze every adapter but the active one. The ``"stacked"`` scheme needs neither:
:meth:`~llm_marl_trainers.generation.TeamModel.forward_logprobs` works in train mode (per-row LoRA dropout included),
gradients reach every agent's adapter and never the base, and the team keeps ``requires_grad`` on all its adapters.
With ``"peft"`` the forward runs in eval mode (no dropout).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from llm_marl_baselines.lora_layers import has_plain_adapters, stacked_adapters

SCHEMES: dict[str, str] = {
    "stacked": "one generate call; every LoRA layer adds bmm(bmm(x, A[row]), B[row]) for per-row adapters (default)",
    "peft": "one generate call; peft's mixed-adapter batch (adapter_names=...), one sub-batch per adapter per layer",
}
"""How rows of one batch run under different adapters (see the module docstring for the measurements)."""


class AdapterRouter:
    """Which adapter each batch row uses, for every LoRA layer of one peft model (the ``"stacked"`` scheme).

    While ``rows`` is None the layers run peft's own forward; ``base_only`` skips every adapter. Gathered per-row
    matrices are cached per layer while grad mode is off (one ``generate`` call re-uses them at every step); with
    gradients they are gathered at each forward so autograd (and gradient checkpointing's recomputation) sees them.
    """

    def __init__(self, agents: Sequence[str]) -> None:
        """``agents``: the adapters of one peft model, in the order rows are numbered by."""
        self.agents = tuple(agents)
        self.rows: Tensor | None = None
        self.base_only = False
        self.cache: dict[int, tuple[Tensor, Tensor, Tensor]] = {}

    def weights(self, layer: Any) -> tuple[Tensor, Tensor, Tensor]:
        """``(A_rows [R, in, r], B_rows [R, r, out], dropout_p_rows [R])`` of ``layer`` for the routed rows; ranks
        differing between agents are zero-padded to the largest (exact), agents without an adapter here get zeros."""
        cached = None if torch.is_grad_enabled() else self.cache.get(id(layer))
        if cached is not None:
            return cached
        assert self.rows is not None
        a_all, b_all = stacked_adapters(layer, self.agents)
        p_all = [float(getattr(layer.lora_dropout[agent], "p", 0.0)) if agent in layer.lora_A else 0.0
                 for agent in self.agents]
        rows = self.rows.to(a_all.device)
        gathered = (a_all[rows], b_all[rows], torch.tensor(p_all, dtype=a_all.dtype, device=a_all.device)[rows])
        if not torch.is_grad_enabled():
            self.cache[id(layer)] = gathered
        return gathered

    @contextlib.contextmanager
    def routed(self, agent_of_row: Sequence[str], *, base_only: bool = False, sticky: bool = False) -> Iterator[None]:
        """Run every row of the next forward passes under its agent's adapter (``base_only``: under none).

        ``sticky`` leaves the routing in place after the block (gradient checkpointing recomputes the forward in the
        backward pass, which must see the same rows); the gathered matrices are dropped either way."""
        index = {agent: i for i, agent in enumerate(self.agents)}
        self.rows = torch.tensor([index[agent] for agent in agent_of_row], dtype=torch.long)
        self.base_only = base_only
        self.cache.clear()
        try:
            yield
        finally:
            self.cache.clear()
            if not sticky:
                self.rows = None
                self.base_only = False


def _routed_forward(layer: Any, router: AdapterRouter, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """A LoRA linear layer's forward under the ``"stacked"`` scheme: ``base(x) + bmm(bmm(x, A[row]), B[row])``, or
    peft's own forward while no rows are routed."""
    if router.rows is None:
        return type(layer).forward(layer, x, *args, **kwargs)
    if layer.merged:
        raise RuntimeError("TeamModel: an adapter was merged into the base weights; routed rows need them unmerged")
    result = layer.base_layer(x, *args, **kwargs)
    if router.base_only:
        return result
    a_rows, b_rows, p_rows = router.weights(layer)
    flat = x.dim() == 2
    h = x.unsqueeze(1) if flat else x
    if h.dim() != 3 or h.shape[0] != a_rows.shape[0]:
        raise RuntimeError(f"TeamModel: routed {a_rows.shape[0]} rows, but a LoRA layer got input of shape "
                           f"{tuple(x.shape)}; route exactly the rows of the batch")
    h = h.to(a_rows.dtype)
    if layer.training and bool((p_rows > 0).any()):
        keep = (torch.rand_like(h) >= p_rows[:, None, None]).to(h.dtype)
        h = h * keep / (1 - p_rows)[:, None, None]
    delta = torch.bmm(torch.bmm(h, a_rows), b_rows)
    return result + (delta.squeeze(1) if flat else delta).to(result.dtype)


def install_router(model: Any, router: AdapterRouter) -> None:
    """Give every LoRA linear layer of ``model`` the routed forward (``"stacked"`` scheme); refuse what it cannot do."""
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    for name, module in model.named_modules():
        if not isinstance(module, LoraLayer):
            continue
        if not isinstance(module, LoraLinear):
            raise ValueError(f"scheme='stacked': expected LoRA on linear layers only, got {type(module).__name__} "
                             f"at {name}; use scheme='peft'")
        if not has_plain_adapters(module):
            raise ValueError(f"scheme='stacked': expected plain LoRA (no DoRA or other variant, no lora_bias) at "
                             f"{name}; use scheme='peft'")
        module.forward = functools.partial(_routed_forward, module, router)
