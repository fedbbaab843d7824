"""Data parallelism for the trainer: one process per device, launched by ``torchrun``, each rank growing its share of a
step's trees and all of them applying the same update.

    torchrun --standalone --nproc-per-node 2 --no-python llm-marl train --env writing --envs-per-step 4 ...

``torchrun`` (or ``accelerate launch``, which sets the same variables) starts the processes and sets ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``; :meth:`DataParallel.from_environment` reads them and joins the process group
(NCCL on GPUs, gloo on CPUs). Without them it is the one-process case, in which every method is the identity and the
trainer runs exactly as it always did.

Why the gradients are all-reduced here rather than by wrapping the model in ``DistributedDataParallel``: DDP's
reducer syncs inside ``backward`` and needs every rank to run the same number of backward passes over the same set
of used parameters. A MAGRPO step does not promise that: a rank's trees end at different depths, so its number of
completions (and micro-batches) differs from its neighbours', and a micro-batch may hold one agent's rows only, so
the other agents' adapters go unused in it. So each rank accumulates its micro-batches' gradients locally, then the
adapters' gradients are summed across ranks in one flat all-reduce per agent, after the backward passes, as
CleanRL's multi-GPU PPO (``ppo_atari_multigpu.py``) does. The losses are weighted by the *global* number of
completions (or tokens, dapo), so the summed gradient is the gradient of the whole step's loss, the same as one
process computing it over every rank's completions.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")

_LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class DataParallel:
    """This process's place among the ranks of a data-parallel run (``world_size == 1``: a plain run)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size or self.local_rank < 0:
            raise ValueError(f"rank {self.rank}, local rank {self.local_rank} of world size {self.world_size}: "
                             f"expected 0 <= rank < world size and local rank >= 0")

    @classmethod
    def from_environment(cls) -> DataParallel:
        """The launcher's ranks (``torchrun`` / ``accelerate launch`` set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``),
        joining the default process group if nobody has yet; one process when ``WORLD_SIZE`` is unset or 1."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size <= 1:
            return cls()
        missing = [name for name in _LAUNCH_VARIABLES if name not in os.environ]
        if missing:
            raise RuntimeError(f"WORLD_SIZE={world_size} but {missing} unset: start data-parallel runs with torchrun "
                               f"(torchrun --nproc-per-node N --no-python llm-marl train ...)")
        parallel = cls(rank=int(os.environ["RANK"]), world_size=world_size, local_rank=int(os.environ["LOCAL_RANK"]))
        if not dist.is_initialized():
            if torch.cuda.is_available():
                torch.cuda.set_device(parallel.local_rank)
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
            atexit.register(_leave_process_group)
        if dist.get_world_size() != world_size or dist.get_rank() != parallel.rank:
            raise RuntimeError(f"the process group (rank {dist.get_rank()} of {dist.get_world_size()}) disagrees with "
                               f"RANK={parallel.rank}, WORLD_SIZE={world_size}")
        return parallel

    @property
    def enabled(self) -> bool:
        """More than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes the run's files and prints."""
        return self.rank == 0

    @property
    def device(self) -> str:
        """Where this rank's model lives: ``auto`` for one process (as before), else this rank's GPU or the CPU."""
        if not self.enabled:
            return "auto"
        return f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu"

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share of ``items``, whose length must be a multiple of ``world_size``."""
        if len(items) % self.world_size:
            raise ValueError(f"{len(items)} items do not split evenly over {self.world_size} ranks")
        share = len(items) // self.world_size
        return list(items[self.rank * share:(self.rank + 1) * share])

    def gather(self, value: T) -> list[T]:
        """Every rank's ``value`` (any picklable object), in rank order, on every rank."""
        if not self.enabled:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered

    def sum(self, value: float) -> float:
        """The sum of ``value`` over the ranks, on every rank."""
        return float(sum(self.gather(value))) if self.enabled else value

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Replace each parameter's gradient by its sum over the ranks, in one flat all-reduce. A gradient missing on
        some ranks counts as zeros there; one missing on every rank stays missing (so AdamW skips that parameter, as
        it would in one process). Every rank must pass the same parameters in the same order."""
        if not self.enabled:
            return
        parameters = list(parameters)
        if not parameters:
            return
        first = parameters[0]
        # The gradients, then one indicator per parameter: after the sum, > 0 where some rank had a gradient.
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in parameters]
                         + [torch.tensor([float(p.grad is not None) for p in parameters], dtype=first.dtype,
                                         device=first.device)])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        present = flat[-len(parameters):].tolist()
        offset = 0
        for p, some_rank_had_one in zip(parameters, present, strict=True):
            size = p.numel()
            p.grad = flat[offset:offset + size].view_as(p).clone() if some_rank_had_one > 0 else None
            offset += size

    def broadcast_parameters(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Copy rank 0's values into every rank's parameters (as DDP does when it wraps a model), so the ranks start
        from one set of adapters whatever each initialised."""
        if not self.enabled:
            return
        with torch.no_grad():
            for p in parameters:
                dist.broadcast(p.data, src=0)

    def barrier(self) -> None:
        """Wait for every rank."""
        if self.enabled:
            dist.barrier()


def _leave_process_group() -> None:
    """Destroy the process group this module joined (torch warns at exit about one left open)."""
    if dist.is_initialized():
        dist.destroy_process_group()


__all__ = ["DataParallel"]
