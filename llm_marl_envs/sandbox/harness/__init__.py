"""Code that runs *inside* the sandbox (standard library only, Python 3.8+ syntax-compatible with 3.10 hosts).

The four modules are concatenated into one ``python3 -I -S -c`` source by :func:`harness_source`; lines ending in
``# harness-import`` are the cross-module imports that only matter when the files are imported normally (tests, lint).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PARTS = ("codec.py", "program.py", "judge.py", "supervisor.py")
_MARKER = "# harness-import"


@lru_cache(maxsize=1)
def harness_source() -> str:
    """The single-file harness source run by both backends."""
    here = Path(__file__).parent
    lines: list[str] = []
    for part in _PARTS:
        for line in (here / part).read_text().splitlines():
            if not line.rstrip().endswith(_MARKER):
                lines.append(line)
    lines.append("if __name__ == '__main__':\n    supervisor_main()")
    return "\n".join(lines) + "\n"
