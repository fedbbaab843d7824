"""Where a run's metric rows go: ``DIR/metrics.jsonl`` always, TensorBoard and W&B when ``report_to`` names them.

Scalars carry TRL's names where the idea exists there (``reward``, ``reward_std``, ``frac_reward_zero_std``,
``step_time``, ``kl``, ``entropy``, ``loss``, ``clip_ratio/*``), under the ``train/`` prefix that transformers'
TensorBoard and W&B callbacks give training logs (``rewrite_logs`` in ``transformers/integrations``); the episode
outcomes are ``train/episode/*`` (``quality``, ``consistency``, ``turns``, ``longest_reply_tokens``,
``discarded_tokens``, ``pass_rate``) and throughput is
``train/tokens_per_second``. The global step is the optimisation step (1, 2, ...).

A resumed run continues the same records: ``metrics.jsonl`` loses the rows after the checkpoint (they are run again,
see :mod:`llm_marl_trainers.checkpoint`), TensorBoard is opened with ``purge_step`` so its readers drop the old events
of those steps, and W&B resumes the run whose id ``DIR/wandb-run-id`` keeps (W&B ignores steps lower than the last it
has, so there the stopped run's values of the repeated steps stay; ``metrics.jsonl`` and TensorBoard are the exact
record).

TensorBoard comes with the ``train`` extra (``torch.utils.tensorboard`` needs the ``tensorboard`` package); ``wandb``
is imported only when ``report_to`` names it (``pip install 'llm-marl-envs[wandb]'``; ``WANDB_MODE=offline`` logs to
``DIR/wandb`` without an account).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_marl_trainers.config import TrainerConfig

PREFIX = "train/"
"""The tag prefix transformers gives training logs (``train/reward``), so curves line up with TRL runs'."""
WANDB_ID_FILE = "wandb-run-id"
DEFAULT_WANDB_PROJECT = "llm-marl-envs"


class MetricsReporter:
    """Writes each metrics row to ``metrics.jsonl`` and to the integrations of ``config.report_to``.

    ``start_step`` is the step the run continues from (0 for a fresh run): TensorBoard purges its events after it.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, output: str | os.PathLike[str], config: TrainerConfig, start_step: int = 0) -> None:
        self.output = Path(output)
        self.output.mkdir(parents=True, exist_ok=True)
        self.jsonl = self.output / "metrics.jsonl"
        self.tensorboard: Any = None
        self.wandb_run: Any = None
        # The integrations start with the global RNGs untouched: a resumed run starts them after restoring the
        # checkpoint's RNG states, and anything they drew would make it diverge from the uninterrupted run.
        with _rng_preserved():
            if "tensorboard" in config.report_to:
                from torch.utils.tensorboard import SummaryWriter

                # purge_step: readers drop the events at steps >= it written before (a resumed run logs them again).
                self.tensorboard = SummaryWriter(log_dir=str(self.tensorboard_dir(config)), purge_step=start_step + 1)
            if "wandb" in config.report_to:
                self.wandb_run = self._start_wandb(config)

    def tensorboard_dir(self, config: TrainerConfig) -> Path:
        """TensorBoard's folder: ``config.logging_dir`` or ``DIR/tensorboard``."""
        return Path(config.logging_dir) if config.logging_dir else self.output / "tensorboard"

    def log(self, row: dict[str, Any]) -> None:
        """Append ``row`` to ``metrics.jsonl`` and send its numbers to the integrations at step ``row["step"]``."""
        with self.jsonl.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        scalars = scalar_metrics(row)
        step = int(row["step"])
        if self.tensorboard is not None:
            for name, value in scalars.items():
                self.tensorboard.add_scalar(name, value, global_step=step)
            self.tensorboard.flush()  # a crash or a kill keeps every step logged so far
        if self.wandb_run is not None:
            self.wandb_run.log(scalars, step=step)

    def close(self) -> None:
        """Flush and close the integrations."""
        if self.tensorboard is not None:
            self.tensorboard.close()
            self.tensorboard = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None

    def __enter__(self) -> MetricsReporter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _start_wandb(self, config: TrainerConfig) -> Any:
        try:
            import wandb
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise ImportError(f"report_to 'wandb' needs wandb ({error}); pip install 'llm-marl-envs[wandb]'") from error
        # One W&B run per output folder: the id is kept so that --resume continues the same run.
        id_file = self.output / WANDB_ID_FILE
        # secrets, not random: drawing from the global RNG would change the run's sampling (checkpoints restore it).
        run_id = id_file.read_text(encoding="utf-8").strip() if id_file.is_file() else secrets.token_hex(4)
        id_file.write_text(run_id + "\n", encoding="utf-8")
        return wandb.init(
            project=os.environ.get("WANDB_PROJECT", DEFAULT_WANDB_PROJECT),
            name=config.run_name,
            id=run_id,
            resume="allow",
            dir=str(self.output),
            config=config.to_dict(),
        )


@contextlib.contextmanager
def _rng_preserved() -> Iterator[None]:
    """Restore Python's, NumPy's and torch's global RNG states after the block."""
    import numpy as np
    import torch

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


def scalar_metrics(row: dict[str, Any]) -> dict[str, float]:
    """The row's numbers as ``train/<name>`` scalars (booleans as 0/1; the step itself is the x axis, not a scalar).

    Non-finite values are kept: a skipped step's NaN loss is what it was.
    """
    scalars = {}
    for name, value in row.items():
        if name == "step" or value is None or isinstance(value, str):
            continue
        if isinstance(value, (bool, int, float)):
            scalars[PREFIX + name] = float(value)
    return scalars


def format_row(row: dict[str, Any]) -> str:
    """One short line for a step: reward, loss, step time and tokens/s (``skipped`` when the update was skipped)."""
    loss = row.get("loss", float("nan"))
    note = " (skipped: non-finite loss)" if row.get("skipped") else ""
    reward, std = row.get("reward", math.nan), row.get("reward_std", math.nan)
    return (f"step {row['step']}: reward {reward:.3f} (std {std:.3f}), "
            f"loss {loss:.4f}{note}, {row.get('step_time', math.nan):.1f} s, "
            f"{row.get('tokens_per_second', math.nan):.0f} tokens/s")
