"""Building the sandbox image, with or without a container registry.

Two routes, one result (an image whose ``python3`` runs the harness with the standard library only):

* **Offline** (default): ``debootstrap --variant=minbase --include=python3`` builds a Debian root file system from the
  Debian mirror apt already uses (no Docker registry involved), docs/caches are trimmed, and the tree is imported
  with ``docker import`` through the SDK. ``python3-minimal`` is not enough: it lacks ``json``.
* **From a base image** (``--base-image python:3.11-slim``): a two-line Dockerfile on top of an image the engine can
  pull or already has.

Nothing is baked into the image but a label: the harness travels with each container's command line, so the image
never goes stale when the harness changes.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_IMAGE = "llm-marl-envs/sandbox:py3-bookworm"
"""The image the Docker backend uses unless told otherwise (the one place its tag is spelled)."""

IMAGE_LABEL = "llm_marl_envs.sandbox.image"
DEBIAN_SUITE = "bookworm"
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")


def docker_client() -> Any:
    """A docker SDK client from the environment (``DOCKER_HOST`` or the local socket); raises when none answers."""
    import docker

    client = docker.from_env(timeout=120)
    client.ping()
    return client


def image_exists(tag: str = DEFAULT_IMAGE, client: Any | None = None) -> bool:
    """Whether the engine has an image with this tag."""
    import docker.errors

    client = client or docker_client()
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 or one-line sources), else deb.debian.org."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
            if line.startswith("deb ") and "security" not in line:
                return next(tok for tok in line.split()[1:] if "://" in tok)
    return "http://deb.debian.org/debian"


def build_offline(tag: str = DEFAULT_IMAGE, *, mirror: str | None = None, log: Any = print) -> str:
    """Build the image with debootstrap + ``docker import`` (needs root and the Debian mirror, not a registry)."""
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: `apt-get install -y debootstrap`, or pass --base-image")
    if os.geteuid() != 0:
        raise RuntimeError("debootstrap needs root; run as root or pass --base-image IMAGE")
    client = docker_client()
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
    with tempfile.TemporaryDirectory(prefix="llm-marl-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs"
        mirror = mirror or debian_mirror()
        log(f"debootstrap {DEBIAN_SUITE} from {mirror} (about half a minute)")
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3", DEBIAN_SUITE, str(rootfs), mirror],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for relative in _TRIM:
            shutil.rmtree(rootfs / relative, ignore_errors=True)
        tarball = Path(scratch) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        log(f"importing as {tag}")
        changes = [
            "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1",
            f"LABEL {IMAGE_LABEL}=debootstrap-{DEBIAN_SUITE}",
            "WORKDIR /tmp",
            'CMD ["python3"]',
        ]
        client.api.import_image_from_file(str(tarball), repository=repository, tag=version, changes=changes)
    return tag


def build_from_base(tag: str, base_image: str, *, log: Any = print) -> str:
    """Build the image ``FROM base_image`` (an official python image where a registry answers)."""
    client = docker_client()
    dockerfile = (
        f"FROM {base_image}\n"
        f"LABEL {IMAGE_LABEL}=from-{base_image.replace(':', '-')}\n"
        "ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1\n"
        "WORKDIR /tmp\n"
    )
    log(f"building {tag} from {base_image}")
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    return tag


def build_image(tag: str = DEFAULT_IMAGE, base_image: str | None = None, *, log: Any = print) -> str:
    """Build the sandbox image offline (debootstrap) or from ``base_image``; return its tag."""
    if base_image:
        return build_from_base(tag, base_image, log=log)
    return build_offline(tag, log=log)
