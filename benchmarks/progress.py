"""Progress of a run of episodes — episodes and turns done, elapsed time and an ETA — for the command line.

A demo on CPU runs for about a minute before it has a table to print; this shows it is working. It listens to
:func:`baselines.collaboration.run_episodes` through its ``on_turn(episode_index, turn)`` and ``on_episode(result)``
callbacks. On a terminal with ``rich`` (the ``[cli]`` extra) it draws one live bar; otherwise (no ``rich``, or
stdout is a pipe, a file or a CI log, where a redrawn bar turns into garbage) it prints one plain line per event.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

from baselines.collaboration import EpisodeResult


class EpisodeProgress:
    """Counts the turns and episodes of ``total_episodes`` episodes of at most ``max_turns`` turns each.

    The ETA is measured in turns: each episode is budgeted ``max_turns``; an episode that ends early is credited its
    unused turns, so the bar still ends at 100%. Call :meth:`begin` before each batch of lockstep episodes, then pass
    :meth:`on_turn` and :meth:`on_episode` to ``run_episodes``.
    """

    def __init__(
        self,
        total_episodes: int,
        max_turns: int,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total_episodes = total_episodes
        self.max_turns = max_turns
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.episodes_done = 0
        self.turns_done = 0
        self.turn_units = 0
        """Turns done plus the turns that episodes which ended early did not need (the bar's position)."""
        self.label = ""
        self.offset = 0
        self.start = clock()
        self._first: tuple[float, int] | None = None
        """(time, turn units) at the first turn: the pace is measured from there, because the time before it is
        mostly one-off set-up (building the envs loads the similarity model)."""
        self._bar: Any = None
        self._task: Any = None
        if live is None:
            live = _is_terminal(self.stream) and _has_rich()
        if live:
            self._open_bar()

    @property
    def total_units(self) -> int:
        """The turn budget of the whole run."""
        return self.total_episodes * self.max_turns

    def begin(self, label: str) -> None:
        """Start a batch (e.g. one env's episodes); its ``episode_index`` values count from the episodes done."""
        self.label, self.offset = label, self.episodes_done
        if self._bar is not None:  # building and resetting the envs takes seconds: say what the bar waits for
            self._bar.update(self._task, description=f"{label}: first turn")

    def on_turn(self, episode_index: int, turn: int) -> None:
        """``run_episodes`` callback: episode ``episode_index`` of the current batch finished turn ``turn``."""
        self.turns_done += 1
        self.turn_units += 1
        if self._first is None:
            self._first = (self.clock(), self.turn_units)
        self._show(f"{self.label} episode {self.offset + episode_index + 1}/{self.total_episodes} turn {turn}")

    def on_episode(self, result: EpisodeResult) -> None:
        """``run_episodes`` callback: an episode ended (credits the turns it did not use)."""
        self.episodes_done += 1
        self.turn_units += max(0, self.max_turns - result.turns)
        self._show(f"{self.label} seed {result.seed} done",
                   f": return {result.episode_return:+.3f} in {result.turns} turn(s), {result.end_reason}")

    def eta_s(self) -> float | None:
        """Seconds left at the pace since the first turn (``None`` until a pace can be measured)."""
        if self._first is None:
            return None
        since, units_then = self._first
        if self.turn_units == units_then:  # one data point: the pace from the start is all there is
            since, units_then = self.start, 0
        return (self.clock() - since) / (self.turn_units - units_then) * max(0, self.total_units - self.turn_units)

    def status(self) -> str:
        """Episodes and turns done, elapsed time and ETA, as one line."""
        eta = self.eta_s()
        return (f"{self.episodes_done}/{self.total_episodes} episodes, {self.turns_done} turns, "
                f"{self.clock() - self.start:.1f} s elapsed, ETA {'?' if eta is None else f'{eta:.0f} s'}")

    def close(self) -> None:
        """Stop the live bar (a no-op for plain lines)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> EpisodeProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _open_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
        )
        self._task = self._bar.add_task("starting", total=self.total_units, counts=self._counts())
        self._bar.start()

    def _counts(self) -> str:
        return f"{self.episodes_done}/{self.total_episodes} episodes · {self.turns_done} turns"

    def _show(self, event: str, detail: str = "") -> None:
        # The live bar gets the short event (it shares one line with the counts); plain lines have room for detail.
        if self._bar is not None:
            self._bar.update(self._task, completed=self.turn_units, description=event, counts=self._counts())
        else:
            print(f"[progress] {event}{detail} · {self.status()}", file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or file-like objects without a terminal
        return False


def _has_rich() -> bool:
    import importlib.util

    return importlib.util.find_spec("rich") is not None
