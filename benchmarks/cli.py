"""The ``llm-marl`` command line: one entry point, one subcommand per job.

Each subcommand lives in its own module and exposes ``register(subparsers)``, which adds its parser and sets
``func`` to the function that runs it; this file only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Sequence

# (module, attribute) pairs, imported lazily so `llm-marl --help` stays fast and a missing extra only breaks the
# subcommand that needs it.
_SUBCOMMANDS: tuple[str, ...] = (
    "llm_marl_benchmarks.demo",
    "llm_marl_envs.sandbox.cli",
    "llm_marl_benchmarks.bench",
    "llm_marl_benchmarks.train",
    "llm_marl_benchmarks.teams",
    "llm_marl_benchmarks.interop",
)
DESCRIPTION = """Collaborative LLM agents as Dec-POMDPs (PettingZoo envs writing_v0 and coding_v0).

`demo` runs a few real episodes with a policy (or a trained team: --adapters DIR, or the shipped one: --adapters
builtin), `sandbox` builds, checks and cleans the Docker unit-test sandbox, `train` trains a team with MAGRPO (its plan,
a measured step-time estimate, checkpoints, exact resume), `teams` lists the shipped teams, draws learning curves and
ships a trained run into the package, `interop` runs a peer library's own trainer (CoMLRL, TorchRL) on one of our
envs, `bench` runs the benchmarks — among them `bench study`, the 6,000-episode study (trained team vs single agent
vs untrained team), and `bench report DIR`, which rebuilds a study's report. The envs themselves are a Python API
(see README.md)."""


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="llm-marl", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in _SUBCOMMANDS:
        importlib.import_module(module_name).register(subparsers)
    return parser


DISTRIBUTION = "llm-marl-envs"
MISSING_EXTRA_STATUS = 1
"""The exit status of a command that needs an extra this install lacks."""

COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "teams": ("train",),  # the shipped teams are LoRA adapters, read with the trainer's stack (peft, torch)
    "bench study": ("study", "train"),  # the main preset plays the shipped teams and tests with statsmodels
    "bench report": ("study", "train"),
    "bench adapter_generation": ("train",),
    "bench trainer_step": ("train", "peers"),  # our trainer beside CoMLRL's and TRL's
    "bench time_to_reward": ("train", "comlrl"),  # our trainer and CoMLRL's, raced
    "interop comlrl": ("comlrl",),
    "interop torchrl": ("torchrl",),
}
"""The extras a command needs as a whole, so one install line fixes it (not only the first module it misses).
A command not listed names the smallest extra that brings the module it missed."""

CHILD_PROCESS_MODULES: dict[str, tuple[str, ...]] = {
    "bench trainer_step": ("torch", "peft"),
    "bench time_to_reward": ("torch", "peft"),
}
"""Modules that commands running their work in child processes always need, checked before any child starts: a
child's missing module would otherwise come back as that child's traceback."""

_IMPORT_NAMES: dict[str, str] = {"pyyaml": "yaml", "scikit-learn": "sklearn"}
"""Distributions whose import name is not their name with dashes as underscores."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``llm-marl`` command line and return its exit status.

    A command that needs an extra this install lacks (``pip install .`` brings only the envs) says so in one line on
    stderr, naming the extra and the install command, and exits with :data:`MISSING_EXTRA_STATUS`: no traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = _command_name(args)
    try:
        asks_help = {"-h", "--help"} & set(getattr(args, "args", ()))  # a benchmark's own --help needs nothing
        for module in () if asks_help else CHILD_PROCESS_MODULES.get(command, ()):
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        return int(args.func(args) or 0)
    except ImportError as error:
        line = missing_extra_line(error, command)
        if line is None:  # not an extra's module: a real bug, so the traceback stays
            raise
        print(f"llm-marl {command}: {line}", file=sys.stderr)
        return MISSING_EXTRA_STATUS


def _command_name(args: argparse.Namespace) -> str:
    """``train``, ``teams``, ``bench study``, ``interop comlrl``...: how :data:`COMMAND_EXTRAS` keys the command
    that ran."""
    detail = {"bench": "name", "interop": "peer"}.get(args.command)
    return f"{args.command} {getattr(args, detail)}" if detail else args.command


def missing_extra_line(error: ImportError, command: str) -> str | None:
    """The one line that tells a user which extra brings what ``error`` missed, or ``None`` when no extra does.

    An error raised by our own code that already names the extra (``pip install 'llm-marl-envs[model]'``) is shown
    as it is; a ``ModuleNotFoundError`` names the extras :data:`COMMAND_EXTRAS` lists for ``command`` when one of them
    brings the module, else the smallest extra that does (read from this install's own metadata, so the line follows
    pyproject.toml)."""
    message = " ".join(str(error).split())
    if f"pip install '{DISTRIBUTION}[" in message:
        return message
    module = (getattr(error, "name", None) or "").split(".")[0]
    extras = extra_modules()
    bringing = sorted((name for name, modules in extras.items() if module in modules), key=lambda e: len(extras[e]))
    if not module or not bringing:
        return None
    needed = [extra for extra in COMMAND_EXTRAS.get(command, ()) if extra in extras]
    if not any(module in extras[extra] for extra in needed):
        needed = bringing[:1]
    joined = ",".join(needed)
    noun = "extra" if len(needed) == 1 else "extras"
    return f"needs the [{joined}] {noun} ({module} is missing): pip install '{DISTRIBUTION}[{joined}]'"


def extra_modules() -> dict[str, set[str]]:
    """Each extra of the installed distribution and the import names it brings, extras it includes resolved
    (``train`` brings ``model``'s torch); ``{}`` when the distribution's metadata cannot be read."""
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    direct: dict[str, set[str]] = {}
    included: dict[str, set[str]] = {}
    for requirement in requirements:
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if marker is None:
            continue  # a core dependency: every install has it
        extra = marker.group(1)
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0).lower()  # type: ignore[union-attr]
        if name.replace("_", "-") == DISTRIBUTION:
            inner = re.search(r"\[([^\]]*)\]", requirement)
            included.setdefault(extra, set()).update(e.strip() for e in (inner.group(1) if inner else "").split(","))
        else:
            direct.setdefault(extra, set()).add(_IMPORT_NAMES.get(name, re.sub(r"[-.]", "_", name)))
    resolved: dict[str, set[str]] = {}

    def resolve(extra: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if extra not in resolved:
            modules = set(direct.get(extra, ()))
            for other in included.get(extra, ()):
                if other and other not in seen:
                    modules |= resolve(other, seen | {extra})
            resolved[extra] = modules
        return resolved[extra]

    return {extra: resolve(extra) for extra in {*direct, *included}}


if __name__ == "__main__":
    sys.exit(main())
