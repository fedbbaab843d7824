"""The distribution adds no generic top-level import name (issue 23): the wheel holds ``llm_marl_envs`` and the
``llm_marl_trainers``, ``llm_marl_baselines`` and ``llm_marl_benchmarks`` packages mapped from the repository's
``trainers/``, ``baselines/`` and ``benchmarks/`` folders, and works beside a user's own ``benchmarks/`` folder and
``trainers`` module."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"llm_marl_envs": "llm_marl_envs", "llm_marl_trainers": "trainers", "llm_marl_baselines": "baselines",
           "llm_marl_benchmarks": "benchmarks"}


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


def test_the_wheel_installs_beside_a_users_benchmarks_folder_and_trainers_module(tmp_path: Path) -> None:
    # Built from a copy of the working tree: pip builds in the source folder, and a build/ left there by an earlier
    # build would both litter the checkout and carry modules since deleted into the wheel.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "runs", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(source)], check=True, cwd=tmp_path)
    (wheel,) = dist.glob("llm_marl_envs-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert top == set(FOLDERS), top  # no trainers/, baselines/ or benchmarks/ at the top of site-packages

    # A fresh venv with the wheel alone; its dependencies come from the test's own environment (appended after the
    # venv's site-packages by a .pth file: that directory's own .pth files, e.g. an editable install's, stay unread).
    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
                   check=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    ours = [entry for entry in sys.path if entry.endswith("site-packages") and Path(entry).is_dir()]
    (site / "zz_test_dependencies.pth").write_text("\n".join([sysconfig.get_paths()["purelib"], *ours]) + "\n")

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
    cli = subprocess.run([str(venv / "bin" / "llm-marl"), "--help"], cwd=user, env=env, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert "train" in cli.stdout and "bench" in cli.stdout
