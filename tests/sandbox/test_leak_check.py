"""Long coding runs leave nothing behind (benchmarks/leak_check.py, shortened): after warm-up, dozens of coding
episodes of honest, broken and hostile programs grow neither temp dirs, containers, open files, threads nor child
processes — on every backend."""

from __future__ import annotations

import os

import pytest
from sandbox_fixtures import need_bwrap, need_docker

from llm_marl_benchmarks import leak_check


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=pytest.mark.docker), "bwrap", "local"])
def test_dozens_of_coding_episodes_leave_nothing_behind(backend: str) -> None:
    if backend == "docker":
        need_docker()
    if backend == "bwrap":
        need_bwrap()
    result = leak_check.run(episodes=24, executor_name=backend, timeout_s=1.0, settle_s=2.0)
    assert result["backend"] == backend and result["episodes"] == 24
    assert result["programs"] >= 24 * 4  # 2 agents x 2 turns per episode, hostile ones among them
    assert result["leaks"] == [], (result["grew"], result["before"], result["after"])
    pool = 2 * (os.cpu_count() or 2)  # the warm pools' default size
    assert result["allowed"] == {"docker": {"open_sockets": 2 * pool}, "bwrap": {"open_files": 3 * pool,
                                                                               "children": pool}}.get(backend, {})
    if backend == "docker":
        # Every container the engine lists for this executor is one its pool holds; their number may be anything up to
        # the pool's size (a container a hostile program killed is replaced only on demand).
        assert result["after"]["containers"] == result["after"]["pooled_sandboxes"] <= pool
    if backend == "bwrap":
        # The warm sandboxes, nothing else. Their number can be anything up to the pool's size: a sandbox whose run
        # timed out is thrown away and the next is started only on demand, so a run that ends on hostile programs
        # can leave none (it once did, when the test ran first in its process).
        assert result["after"]["children"] == result["after"]["pooled_sandboxes"] <= pool


def test_only_growth_counts_as_a_leak() -> None:
    # Closing the envs frees pooled containers and descriptors: fewer after than before is not a leak (CI once
    # failed on open_fds -1 and containers -N).
    grew = {"temp_entries": [], "open_files": -1, "open_sockets": -2, "threads": 0, "children": 0, "containers": -4}
    assert leak_check.leaks_in(grew) == []
    assert leak_check.leaks_in({**grew, "threads": 1, "temp_entries": ["llm-marl-x"]}) == ["temp_entries", "threads"]
    assert leak_check.leaks_in({**grew, "containers": None}) == []
    # Sockets move with the Docker pool (a container replaced mid-run): growth within the bound is not a leak.
    docker = {"open_sockets": 8}
    assert leak_check.leaks_in({**grew, "open_sockets": 2}, docker) == []
    assert leak_check.leaks_in({**grew, "open_sockets": 9}, docker) == ["open_sockets"]
    assert leak_check.leaks_in({**grew, "open_sockets": 1}) == ["open_sockets"]  # the local backend holds none
    assert leak_check.leaks_in({**grew, "open_files": 1}, docker) == ["open_files"]  # files, pipes: none on Docker
    # A bwrap sandbox is a child process with three pipes: the pool's size moves them, within its bound.
    bwrap = {"open_files": 12, "children": 4}
    assert leak_check.leaks_in({**grew, "open_files": 3, "children": 1}, bwrap) == []
    assert leak_check.leaks_in({**grew, "open_files": 13, "children": 5}, bwrap) == ["open_files", "children"]
    assert leak_check.leaks_in({**grew, "open_sockets": 1}, bwrap) == ["open_sockets"]


def test_the_allowance_is_the_warm_pool() -> None:
    class Docker:
        backend, pool_size = "docker", 4

    class Bwrap:
        backend, pool_size = "bwrap", 4

    class Cached:  # the shared executor wraps the backend in a verdict cache
        inner = Docker()

    class Local:
        backend = "local"

    assert leak_check.pool_allowance(Cached()) == leak_check.pool_allowance(Docker()) == {"open_sockets": 8}
    assert leak_check.pool_allowance(Bwrap()) == {"open_files": 12, "children": 4}
    assert leak_check.pool_allowance(Local()) == {}


def test_the_catalogue_spares_only_what_would_attack_the_caller() -> None:
    local = dict(leak_check.programs("local"))
    docker = dict(leak_check.programs("docker"))
    assert {"honest", "syntax_error", "infinite_loop", "fork_bomb", "setsid_escape"} <= set(local)
    assert not {"kill_everything", "kill_parent"} & set(docker)
    assert set(local) <= set(docker) == set(dict(leak_check.programs("bwrap")))


def test_containers_count_as_left_behind_only_when_the_pool_let_go_of_them() -> None:
    # CI once failed on containers +1: the pool had replaced a killed container between the two readings.
    before = {"containers": 3, "pooled_sandboxes": 3}
    refilled = {"containers": 4, "pooled_sandboxes": 4}
    left_behind = {"containers": 4, "pooled_sandboxes": 3}
    assert leak_check.stray_containers(refilled) - leak_check.stray_containers(before) == 0
    assert leak_check.stray_containers(left_behind) - leak_check.stray_containers(before) == 1
    assert leak_check.leaks_in({"containers": 1}) == ["containers"]
