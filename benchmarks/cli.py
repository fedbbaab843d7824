"""The ``llm-marl`` command line: one entry point, one subcommand per job.

Each subcommand lives in its own module and exposes ``register(subparsers)``, which adds its parser and sets
``func`` to the function that runs it; this file only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``llm-marl`` command line and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
