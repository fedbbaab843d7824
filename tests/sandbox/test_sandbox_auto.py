"""``executor="auto"`` where isolation is partly or wholly missing: it picks Docker, else bwrap, and never runs code
unisolated unasked.

Missing pieces are made real rather than mocked: a Docker client pointed at a socket that does not exist
(``DOCKER_HOST``), a ``PATH`` without ``bwrap``, an image tag the engine does not have.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_fixtures import HOSTILE_LIMITS, need_bwrap, need_docker

from llm_marl_envs.sandbox import NoIsolationError, SandboxError, choose_backend, docker_status, make_executor

DEAD_DOCKER = "unix:///nonexistent/docker.sock"
MISSING_IMAGE = "llm-marl-envs/sandbox:does-not-exist"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Docker client of this process talks to a socket nobody listens on."""
    monkeypatch.setenv("DOCKER_HOST", DEAD_DOCKER)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``bwrap`` is not on this process's PATH."""
    monkeypatch.setenv("PATH", str(tmp_path))


def test_bwrap_missing_is_a_clear_error_that_says_how_to_install_it(no_bwrap: None) -> None:
    with pytest.raises(SandboxError, match=r"bwrap is not installed.*apt-get install bubblewrap"):
        make_executor("bwrap")


def test_a_broken_bwrap_says_what_it_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A ``bwrap`` that cannot start a sandbox (user namespaces off, say) is found out before the first run."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="installed but could not start a sandbox: bwrap: setting up uid map"):
        make_executor("bwrap")


def test_auto_without_docker_picks_bwrap_and_says_so(no_docker: None, caplog: pytest.LogCaptureFixture) -> None:
    need_bwrap()
    docker_ok, docker_reason = docker_status()
    assert not docker_ok and "no Docker engine answers" in docker_reason
    with caplog.at_level(logging.INFO, logger="llm_marl_envs.sandbox"):
        assert choose_backend() == "bwrap"
        with make_executor("auto", HOSTILE_LIMITS, pool_size=1) as executor:
            assert executor.backend == "bwrap"
            report = executor.run("def f():\n    return 1", ["assert f() == 1", "assert f() == 2"])
    assert [o.status for o in report.outcomes] == ["passed", "failed"] and report.backend == "bwrap"
    assert "executor='auto' chose bwrap" in caplog.text and "no Docker engine answers" in caplog.text


def test_auto_without_docker_or_bwrap_refuses_and_says_how_to_get_isolation(no_docker: None, no_bwrap: None) -> None:
    with pytest.raises(NoIsolationError) as caught:
        make_executor("auto")
    message = str(caught.value)
    for part in ("no Docker engine answers", "bwrap is not installed", "llm-marl sandbox build-image",
                 "apt-get install bubblewrap", "executor='local'"):
        assert part in message, (part, message)
    with make_executor("local") as local:  # named, local still runs (the user's informed choice)
        assert local.run("def f():\n    return 1", ["assert f() == 1"]).all_passed


def test_engine_without_image_is_never_a_silent_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An engine that answers without the sandbox image (a failed image build) gives bwrap with a warning that says
    how to build the image, or, without bwrap, the refusal naming the missing image."""
    need_docker()
    need_bwrap()
    with pytest.warns(UserWarning, match=r"runs on bwrap, not Docker.*no sandbox image.*build-image"):
        executor = make_executor("auto", HOSTILE_LIMITS, image=MISSING_IMAGE, pool_size=1)
    with executor:
        assert executor.backend == "bwrap"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NoIsolationError, match=r"engine answers but has no sandbox image"):
        make_executor("auto", image=MISSING_IMAGE)


def test_auto_refuses_options_no_backend_takes() -> None:
    with pytest.raises(TypeError, match=r"options: unknown \['pool'\]"):
        make_executor("auto", pool=2)


COMING_FROM_A_FRESH_PROCESS = """
import os, sys
from llm_marl_envs import coding_v0
env = coding_v0.parallel_env(num_agents=1, dataset="decomposable", similarity="tfidf", timeout_s=2.0)
env.reset(seed=0)
_, _, _, _, infos = env.step({"solo": "def f(x):\\n    return x"})
print("backend", infos["solo"]["details"]["tests"]["backend"])
os.environ["PATH"] = sys.argv[1]
try:
    coding_v0.parallel_env(num_agents=1, similarity="tfidf", timeout_s=2.5)
except Exception as error:
    print("refused", type(error).__name__, str(error).replace(chr(10), " "))
"""


def test_coding_env_on_a_machine_without_docker_runs_on_bwrap_or_refuses(tmp_path: Path) -> None:
    """The default env, as a new user builds it: on bwrap without Docker, refused at construction without bwrap."""
    need_bwrap()
    env = {**os.environ, "DOCKER_HOST": DEAD_DOCKER}
    done = subprocess.run([sys.executable, "-c", COMING_FROM_A_FRESH_PROCESS, str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "backend bwrap" in lines
    refusal = next(line for line in lines if line.startswith("refused"))
    assert refusal.startswith("refused NoIsolationError") and "executor='local'" in refusal


def test_cli_check_says_what_auto_picks_and_self_tests_it(tmp_path: Path) -> None:
    need_bwrap()
    env = {**os.environ, "DOCKER_HOST": DEAD_DOCKER}
    command = [sys.executable, "-m", "llm_marl_benchmarks.cli", "sandbox", "check"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "docker: unavailable: no Docker engine answers" in done.stdout and "bwrap: ready" in done.stdout
    assert "auto: picks bwrap" in done.stdout and "self-test: ok" in done.stdout
    env["PATH"] = f"{tmp_path}"
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert refused.returncode == 1 and "bwrap: unavailable: bwrap is not installed" in refused.stdout
    assert "executor='local'" in refused.stdout and "self-test" not in refused.stdout
