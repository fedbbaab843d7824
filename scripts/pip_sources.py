"""Print pip's configured package sources as uv command-line flags, one per line (scripts/setup.sh reads them).

uv does not read pip's configuration files or ``PIP_*`` variables, so on a machine whose pip is pointed at a mirror,
local indexes, a wheel folder or a constraints file, a bare ``uv pip install`` would resolve against other sources
than ``pip install`` and could pick other versions. This maps pip's settings onto uv's: ``index-url``,
``extra-index-url``, ``find-links``, ``constraint`` (and ``no-index``), with pip's precedence between where they are
set (the ``global`` section, then the ``install`` section, then ``PIP_*`` variables: the later wins). With extra
indexes uv is told to pick the best version across all of them, as pip does (uv's default takes the first index that
has the package). pip's ``cert`` is printed by ``--cert`` alone (setup.sh gives it to uv as ``SSL_CERT_FILE``).

Usage: ``python scripts/pip_sources.py [--cert]`` (runs ``python -m pip config list``), or ``--from FILE`` with that
command's output (tests).
"""

from __future__ import annotations

import argparse
import ast
import shlex
import subprocess
import sys
from pathlib import Path

_SECTION_RANK = {"global": 0, "install": 1, ":env:": 2}
"""pip's order of precedence between configuration sections (later wins; files of one section are merged by pip)."""

_MULTI = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "--constraint"}
"""Settings that may hold several whitespace-separated values, and uv's flag for each value."""


def settings(config_list: str) -> dict[str, str]:
    """The effective value of each setting in ``pip config list`` output (``section.key='value'`` lines)."""
    best: dict[str, tuple[int, str]] = {}
    for line in config_list.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.strip().rpartition(".")
        if not sep or not dot or section not in _SECTION_RANK:
            continue
        try:
            value = ast.literal_eval(raw.strip())  # pip prints the value with repr()
        except (SyntaxError, ValueError):
            value = raw.strip()
        rank = _SECTION_RANK[section]
        if key not in best or rank >= best[key][0]:
            best[key] = (rank, str(value))
    return {key: value for key, (_, value) in best.items()}


def uv_flags(config: dict[str, str]) -> list[str]:
    """uv ``pip install`` flags giving the same package sources as pip with ``config``."""
    flags: list[str] = []
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        flags.append("--no-index")
    if config.get("index-url"):
        flags += ["--index-url", config["index-url"]]
    for key, flag in _MULTI.items():
        for value in config.get(key, "").split():
            flags += [flag, value]
    if config.get("extra-index-url", "").split():
        flags += ["--index-strategy", "unsafe-best-match"]
    return flags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=None, help="pip config list output to read")
    parser.add_argument("--cert", action="store_true", help="print pip's CA bundle setting instead (or nothing)")
    args = parser.parse_args(argv)
    if args.source is not None:
        text = args.source.read_text(encoding="utf-8")
    else:
        text = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              check=True).stdout
    config = settings(text)
    flags = ([config["cert"]] if config.get("cert") else []) if args.cert else uv_flags(config)
    # One flag or value per line: setup.sh reads them into an array (values with spaces survive).
    for item in flags:
        if "\n" in item:
            raise SystemExit(f"pip_sources: a configured value holds a newline: {shlex.quote(item)}")
        print(item)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
