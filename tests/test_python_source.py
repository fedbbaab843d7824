"""Parsing from several threads at once: the package's parse lock (llm_marl_envs/core/python_source.py).

CPython 3.11 before 3.11.8 fails a parse that another thread interleaves with (gh-106905). A garbage collection that
runs ``__del__`` code mid-parse gives the interpreter a chance to switch threads there, so the test makes plenty of
such garbage; without the lock it reproduces the ``SystemError`` within a second on 3.11.7.
"""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from llm_marl_envs.core.python_source import parse_python, try_parse_module
from llm_marl_envs.envs.coding.quality import code_metrics
from llm_marl_envs.sandbox.splitting import split_tests

SOURCE = "def aux(x):\n    return [[[[(x + 1) * 2 for _ in range(3)]]]]\n" * 50


class _FinalizedCycle:
    """Garbage whose collection runs Python code (a thread switch point inside a parse)."""

    def __del__(self) -> None:
        sum(range(50))


def _hammer(parse, rounds: int, errors: list[str]) -> None:
    for _ in range(rounds):
        first, second = _FinalizedCycle(), _FinalizedCycle()
        first.other, second.other = second, first
        del first, second
        try:
            parse()
        except SystemError as error:
            errors.append(str(error))
            return


@pytest.fixture
def switch_often():
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50)
    yield
    sys.setswitchinterval(interval)
    gc.set_threshold(*thresholds)


def test_parsing_on_many_threads_at_once_never_trips_the_ast_constructor(switch_often):
    errors: list[str] = []
    parsers = [lambda: parse_python(SOURCE), lambda: try_parse_module(SOURCE),
               lambda: split_tests("assert f(1) == 2\nassert f(2) == 3\n" * 20, "f"),
               lambda: code_metrics(SOURCE)]  # radon parses inside
    threads = [threading.Thread(target=_hammer, args=(parsers[i % len(parsers)], 60, errors)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_untrusted_text_that_does_not_parse_is_none_not_an_error():
    assert try_parse_module("def f(:\n") is None
    assert try_parse_module("x = 1\x00") is None
    assert try_parse_module("(" * 10_000 + ")" * 10_000) is None
    assert try_parse_module("x = 1").body[0].targets[0].id == "x"
    with pytest.raises(SyntaxError):
        parse_python("def f(:\n")
