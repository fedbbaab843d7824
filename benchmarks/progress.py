"""The one progress display of the command line: units done of a total, elapsed time and an ETA.

Every long command uses it — ``llm-marl train`` (steps), ``llm-marl bench study`` (turns of its lockstep batches,
with episodes done), ``llm-marl demo`` (turns of lockstep episodes). On a terminal with ``rich`` (the ``[cli]``
extra) it draws one live bar; otherwise (no ``rich``, or the stream is a pipe, a file or a CI log, where a redrawn bar
turns into garbage) it prints one plain line per update. The ETA is the pace since the first update, because the
time before it is mostly one-off set-up (loading a model, building envs)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TextIO

from llm_marl_baselines.collaboration import EpisodeResult


class Progress:
    """``total`` units of work (steps, episodes, turns), ``initial`` of them done before this run (a resume).

    :meth:`advance` records finished units with a short ``event`` (what just happened) and an optional ``detail`` (the
    figures of a plain line, which has room for them); ``tag`` prefixes plain lines (``[train]``).
    """

    def __init__(
        self,
        total: int,
        unit: str,
        *,
        initial: int = 0,
        tag: str = "progress",
        stream: TextIO | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.unit, self.tag = total, unit, tag
        self.done = self.initial = initial
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.start = clock()
        self._first: tuple[float, float] | None = None
        """(time, units done) at the first update: the pace is measured from there."""
        self._bar: Any = None
        self._task: Any = None
        if live is None:
            live = is_terminal(self.stream) and _has_rich()
        if live:
            self._open_bar()

    def advance(self, units: float = 1, event: str = "", detail: str = "", counts: str = "") -> None:
        """``units`` more are done; show ``event`` (and, on a plain line, ``detail``); ``counts`` replaces the
        default ``done/total unit`` text."""
        self.done += units
        if self._first is None:
            self._first = (self.clock(), self.done)
        counts = counts or f"{self.done:g}/{self.total} {self.unit}s"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=event or self.tag, counts=counts)
        else:
            print(f"[{self.tag}] {event}{detail} · {counts}, {self.timing()}", file=self.stream, flush=True)

    def describe(self, event: str) -> None:
        """Say what the bar waits for (a live bar only: plain lines are for finished work)."""
        if self._bar is not None:
            self._bar.update(self._task, description=event)

    def eta_s(self) -> float | None:
        """Seconds left at the pace since the first update (``None`` until a pace can be measured)."""
        if self._first is None:
            return None
        since, done_then = self._first
        if self.done == done_then:  # one data point: the pace from the start is all there is
            since, done_then = self.start, self.initial
            if self.done == done_then:
                return None
        return (self.clock() - since) / (self.done - done_then) * max(0.0, self.total - self.done)

    def timing(self) -> str:
        """Elapsed time and ETA, as text."""
        eta = self.eta_s()
        return f"{duration(self.clock() - self.start)} elapsed, ETA {'?' if eta is None else duration(eta)}"

    def write(self, line: str) -> None:
        """A line above the bar (or a plain line)."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the live bar (a no-op for plain lines)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _open_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
        )
        self._task = self._bar.add_task(self.tag, total=self.total, completed=self.done,
                                        counts=f"{self.done:g}/{self.total} {self.unit}s")
        self._bar.start()


class EpisodeProgress(Progress):
    """Turns and episodes of ``total_episodes`` lockstep episodes of at most ``max_turns`` turns each.

    The bar counts turns: each episode is budgeted ``max_turns``; an episode that ends early is credited its unused
    turns, so the bar still ends at 100 %. Call :meth:`begin` before each batch of lockstep episodes, then pass
    :meth:`on_turn` and :meth:`on_episode` to ``run_episodes``.
    """

    def __init__(self, total_episodes: int, max_turns: int, **kwargs: Any) -> None:
        super().__init__(total_episodes * max_turns, "turn", **kwargs)
        self.total_episodes, self.max_turns = total_episodes, max_turns
        self.episodes_done = 0
        self.turns_done = 0
        self.label = ""
        self.offset = 0

    @property
    def turn_units(self) -> float:
        """Turns done plus the turns that episodes which ended early did not need (the bar's position)."""
        return self.done

    def begin(self, label: str) -> None:
        """Start a batch (e.g. one env's episodes); its ``episode_index`` values count from the episodes done."""
        self.label, self.offset = label, self.episodes_done
        self.describe(f"{label}: first turn")  # building and resetting the envs takes seconds

    def on_turn(self, episode_index: int, turn: int) -> None:
        """``run_episodes`` callback: episode ``episode_index`` of the current batch finished turn ``turn``."""
        self.turns_done += 1
        self.advance(1, f"{self.label} episode {self.offset + episode_index + 1}/{self.total_episodes} turn {turn}",
                     counts=self._counts())

    def on_episode(self, result: EpisodeResult) -> None:
        """``run_episodes`` callback: an episode ended (credits the turns it did not use)."""
        self.episodes_done += 1
        self.advance(max(0, self.max_turns - result.turns), f"{self.label} seed {result.seed} done",
                     f": return {result.episode_return:+.3f} in {result.turns} turn(s), {result.end_reason}",
                     counts=self._counts())

    def _counts(self) -> str:
        return f"{self.episodes_done}/{self.total_episodes} episodes · {self.turns_done} turns"


@dataclass(frozen=True)
class LockstepTurn:
    """One turn of a lockstep batch of episodes, as the study's runner reports it once every episode of the batch
    that was still playing has stepped."""

    label: str
    """What the batch plays (e.g. ``coding: untrained + single``)."""
    turn: int
    """The turn just played (1-based)."""
    played: int
    """Episodes that played this turn."""
    ended: int
    """Of them, the episodes that ended with it."""
    unused_turns: int
    """Turns of their budgets that the episodes ending now did not use."""
    batch_done: int
    """Episodes of the batch ended so far."""
    batch_size: int
    """Episodes in the batch."""


class StudyProgress(Progress):
    """A study's progress in turns: each planned episode is budgeted its turn budget, every played turn counts one and
    an episode that ends early is credited the turns it did not use, so the bar ends at 100 % and the ETA comes from
    the pace of measured turns. One plain line per turn of a running batch (:meth:`on_turn`), not per batch: a batch
    of long episodes shows it is moving within seconds of its first turn.

    ``budgets``: the turn budget of every planned episode; ``done``: those of the episodes already logged (a resume).
    """

    def __init__(self, budgets: Sequence[int], done: Sequence[int] = (), **kwargs: Any) -> None:
        kwargs.setdefault("tag", "study")
        super().__init__(sum(budgets), "turn", initial=sum(done), **kwargs)
        self.episodes_total = len(budgets)
        self.episodes_done = self.episodes_before = len(done)
        self.turns_played = 0

    def on_turn(self, turn: LockstepTurn) -> None:
        """A lockstep batch played one turn (the runner's per-turn callback)."""
        self.turns_played += turn.played
        self.episodes_done += turn.ended
        ended = f", {turn.ended} ended" if turn.ended else ""
        self.advance(turn.played + turn.unused_turns, f"{turn.label} turn {turn.turn}",
                     f": {turn.played} episodes played it{ended} ({turn.batch_done}/{turn.batch_size} of the batch "
                     "done)", counts=self._counts())

    def episodes_logged(self, budgets: Sequence[int], label: str, turns: Sequence[int] = ()) -> None:
        """Episodes finished elsewhere (Ray workers report rows, not turns): each counts its whole budget."""
        if not budgets:
            return
        self.turns_played += sum(turns)
        self.episodes_done += len(budgets)
        self.advance(sum(budgets), label, f": {len(budgets)} episodes logged", counts=self._counts())

    def rates(self) -> tuple[float, float] | None:
        """(episodes, turns played) per minute in this run so far; None before any time has passed."""
        elapsed = self.clock() - self.start
        if elapsed <= 0:
            return None
        return (self.episodes_done - self.episodes_before) / elapsed * 60, self.turns_played / elapsed * 60

    def _counts(self) -> str:
        rates = self.rates()
        pace = f" · {rates[0]:.1f} episodes/min, {rates[1]:.1f} turns/min" if rates else ""
        return f"{self.episodes_done}/{self.episodes_total} episodes · {self.turns_played} turns played{pace}"


def duration(seconds: float) -> str:
    """``seconds`` as ``2 h 05 min``, ``3 min 20 s`` or ``12.5 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else f"{rest // 60} min {rest % 60:02d} s"


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False for closed or file-like objects without one)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _has_rich() -> bool:
    import importlib.util

    return importlib.util.find_spec("rich") is not None
