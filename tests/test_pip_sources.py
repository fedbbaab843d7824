"""scripts/pip_sources.py: setup.sh's uv installs from the sources pip is configured with, with pip's precedence."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pip_sources.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pip_sources", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pip_sources = _module()

# `pip config list` as pip 24-26 prints it: sorted `section.key='value'`, a value repr()'d, several values in one.
CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/somewhere/else.pem'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/old-wheels'
global.index-url='https://mirror.example/simple'
install.index-url='https://install-section.example/simple'
"""


def test_each_setting_takes_pips_precedence_env_over_install_over_global() -> None:
    config = pip_sources.settings(CONFIG_LIST)
    assert config["find-links"] == "/opt/wheels"  # PIP_FIND_LINKS beats the global file
    assert config["cert"] == "/etc/ssl/certs/ca-certificates.crt"
    assert config["index-url"] == "https://install-section.example/simple"  # [install] beats [global]
    assert config["constraint"] == "/etc/xdg/pip/constraints.txt"


def test_the_flags_give_uv_every_source_and_pips_best_match_across_indexes() -> None:
    flags = pip_sources.uv_flags(pip_sources.settings(CONFIG_LIST))
    assert flags == ["--index-url", "https://install-section.example/simple",
                     "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
                     "--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt",
                     "--index-strategy", "unsafe-best-match"]


def test_an_unconfigured_pip_gives_no_flags_and_no_index_is_kept() -> None:
    assert pip_sources.uv_flags(pip_sources.settings("")) == []
    # Lines that are not settings (a warning pip printed, a section pip may add later) are ignored.
    assert pip_sources.uv_flags(pip_sources.settings("WARNING: something\nfuture.index-url='x'\n")) == []
    assert pip_sources.uv_flags({"no-index": "true", "find-links": "/w"}) == ["--no-index", "--find-links", "/w"]


def test_the_script_prints_one_flag_or_value_per_line(tmp_path: Path) -> None:
    listing = tmp_path / "config.txt"
    listing.write_text(CONFIG_LIST, encoding="utf-8")
    run = [sys.executable, str(SCRIPT), "--from", str(listing)]
    flags = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert flags == pip_sources.uv_flags(pip_sources.settings(CONFIG_LIST))
    cert = subprocess.run([*run, "--cert"], capture_output=True, text=True, check=True).stdout
    assert cert == "/etc/ssl/certs/ca-certificates.crt\n"


def test_this_machines_pip_configuration_reads_without_error() -> None:
    """The real `pip config list` of the interpreter running the tests: whatever it holds, the script reads it, and
    every setting it passes on is one pip itself reports."""
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True).stdout
    flags = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True).stdout
    lines = [line for line in flags.splitlines() if line != "--no-index"]  # the one flag without a value
    assert len(lines) % 2 == 0
    pairs = list(zip(lines[::2], lines[1::2], strict=True))
    assert all(flag.startswith("--") for flag, _ in pairs)
    assert all(value in listing for flag, value in pairs if flag != "--index-strategy")
    flags_given = {flag for flag, _ in pairs}
    assert ("--index-strategy" in flags_given) == ("--extra-index-url" in flags_given)
