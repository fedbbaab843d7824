"""``llm-marl sandbox``: build the image, check which sandbox backends can run here, remove orphaned containers."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from llm_marl_envs.sandbox.image import DEFAULT_IMAGE


def register(subparsers: Any) -> None:
    """Add the ``sandbox`` command and its subcommands to the ``llm-marl`` parser."""
    parser = subparsers.add_parser("sandbox", help="the unit-test sandbox: build-image, check, clean")
    commands = parser.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND", required=True)

    build = commands.add_parser(
        "build-image",
        help="build the sandbox image (offline with debootstrap by default) when its inputs changed",
        description="Build the sandbox image when it is missing or its inputs (route, Debian suite or base image, "
        "build recipe) changed since it was built; the digest of those inputs is stored as an image label. "
        "A build removes the image it replaces, so no dangling image is left.",
    )
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"image tag (default {DEFAULT_IMAGE})")
    build.add_argument("--base-image", default=None, help="build FROM this image (e.g. python:3.11-slim) instead")
    when = build.add_mutually_exclusive_group()
    when.add_argument("--if-missing", action="store_true",
                      help="do nothing when the tag exists, even if it was built from other inputs")
    when.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    build.set_defaults(func=build_image_command)

    check = commands.add_parser(
        "check", help="say which backends can run here and what executor='auto' picks, then run a self-test",
        description="Print whether Docker (engine and image) and bwrap can run sandboxes here and which one "
        "executor='auto' picks, then run a self-test on it (or on --backend): a passing program, a failing one and "
        "an endless one must come out right. Exit status 1 when the backend cannot run or the self-test fails.",
    )
    check.add_argument("--image", default=DEFAULT_IMAGE)
    check.add_argument("--backend", choices=("auto", "docker", "bwrap", "local"), default="auto",
                       help="the backend to self-test (default: the one executor='auto' picks)")
    check.set_defaults(func=check_command)

    clean = commands.add_parser("clean", help="remove sandbox containers whose owner process is gone")
    clean.add_argument("--all", action="store_true", help="remove every sandbox container, live owners included")
    clean.set_defaults(func=clean_command)


def build_image_command(args: argparse.Namespace) -> int:
    """``sandbox build-image``: exit status 1, with one line saying why (as ``sandbox check`` says it), when no
    Docker engine answers."""
    from llm_marl_envs.sandbox.backends import _docker_state
    from llm_marl_envs.sandbox.image import ensure_image, image_exists, image_is_current

    state, reason = _docker_state(args.tag)
    if state == "no-engine":
        print(f"docker: unavailable: {reason}; the image needs a running engine (see docs/sandbox.md)",
              file=sys.stderr)
        return 1
    if args.if_missing and image_exists(args.tag):
        stale = "" if image_is_current(args.tag, args.base_image) else " (built from other inputs: drop --if-missing)"
        print(f"{args.tag} already exists{stale}")
        return 0
    if ensure_image(args.tag, args.base_image, force=args.force):
        print(f"built {args.tag}")
    return 0


def check_command(args: argparse.Namespace) -> int:
    """``sandbox check``: what can run here, what ``auto`` picks, and a self-test (a pass, a failure and a timeout
    must come out right)."""
    from llm_marl_envs.sandbox.backends import _docker_state, choose_backend, make_executor
    from llm_marl_envs.sandbox.bwrap_backend import bwrap_status
    from llm_marl_envs.sandbox.types import SandboxError, SandboxLimits

    state, reason = _docker_state(args.image)
    if state != "no-engine":
        from llm_marl_envs.sandbox.image import docker_client

        client = docker_client()
        print(f"engine: Docker {client.version().get('Version', '?')}")
        client.close()
    print(f"docker: {'ready' if state == 'ready' else 'unavailable'}: {reason}")
    bwrap_ok, bwrap_reason = bwrap_status()
    print(f"bwrap: {'ready' if bwrap_ok else 'unavailable'}: {bwrap_reason}")
    backend = args.backend
    if backend == "auto":
        try:
            backend = choose_backend(args.image)
        except SandboxError as exc:
            print(f"auto: {exc}")
            return 1
        print(f"auto: picks {backend}")
    options = {"image": args.image, "pool_size": 1} if backend == "docker" else {"pool_size": 1}
    try:
        executor = make_executor(backend, SandboxLimits(timeout_s=1.0), **({} if backend == "local" else options))
    except SandboxError as exc:
        print(f"self-test: cannot start {backend} ({exc})")
        return 1
    cases = [
        ("passing program", "def f(x):\n    return x + 1", "passed"),
        ("failing program", "def f(x):\n    return x", "failed"),
        ("endless program", "def f(x):\n    while True:\n        pass", "timeout"),
    ]
    ok = True
    with executor:
        for name, code, expected in cases:
            report = executor.run(code, ["assert f(1) == 2"])
            status = report.outcomes[0].status
            ok &= status == expected
            print(f"self-test {name} on {backend}: {status} (expected {expected}, {report.duration_s:.3f} s)"
                  + (f": {report.error}" if status != expected and report.error else ""))
    print("self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def clean_command(args: argparse.Namespace) -> int:
    """``sandbox clean``."""
    from llm_marl_envs.sandbox.docker_backend import remove_orphans

    removed = remove_orphans(everything=args.all)
    print(f"removed {len(removed)} sandbox container(s)")
    return 0
