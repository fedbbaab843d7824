"""peft LoRA linear layers computed per row: what a layer is, whether its adapters are plain, and its adapters stacked.

Two places run a LoRA layer as ``base(x) + x·A·(B·scaling)`` with each batch row under its own adapter: the team's
stacked routing (``trainers/lora_routing.py``), which trains through it, and the graph decoder
(:mod:`llm_marl_baselines.graph_decode`), which copies the stacks into the buffers its captured step reads. Both take
the adapters from here, so they compute the same update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor


def is_lora_layer(module: Any) -> bool:
    """Whether ``module`` is a peft LoRA layer (it wraps a ``base_layer`` and holds ``lora_A``/``lora_B`` per adapter;
    read by attribute, so peft need not be imported)."""
    return hasattr(module, "base_layer") and hasattr(module, "lora_A") and hasattr(module, "lora_B")


def has_plain_adapters(module: Any) -> bool:
    """Whether every adapter of the LoRA layer ``module`` is a plain ``B·A`` update: no DoRA or other variant, no
    ``lora_bias`` (the per-row product computes nothing else)."""
    return not getattr(module, "lora_variant", None) and not any(
        getattr(b, "bias", None) is not None for b in module.lora_B.values())


def stacked_adapters(layer: Any, adapters: Sequence[str]) -> tuple[Tensor, Tensor]:
    """``(A [n, in, r], B·scaling [n, r, out])`` of the LoRA layer ``layer`` for ``adapters``, in that order: ranks
    that differ are zero-padded to the largest (exact: the padded rows and columns multiply to zero), an adapter the
    layer lacks gets zeros. Differentiable (the routed forward trains through it)."""
    present = [name for name in adapters if name in layer.lora_A]
    template = layer.lora_A[present[0]].weight if present else next(iter(layer.lora_A.values())).weight
    rank = max((layer.lora_A[name].weight.shape[0] for name in present), default=1)
    out_features = layer.base_layer.weight.shape[0]
    a_all, b_all = [], []
    for name in adapters:
        if name in layer.lora_A:
            a = layer.lora_A[name].weight  # [r, in]
            b = layer.lora_B[name].weight * layer.scaling[name]  # [out, r]
            pad = rank - a.shape[0]
            if pad:
                a = torch.nn.functional.pad(a, (0, 0, 0, pad))
                b = torch.nn.functional.pad(b, (0, pad))
        else:
            a = template.new_zeros(rank, template.shape[1])
            b = template.new_zeros(out_features, rank)
        a_all.append(a.T)
        b_all.append(b.T)
    return torch.stack(a_all), torch.stack(b_all)
