"""Building the sandbox image, with or without a container registry.

Two routes, one result (an image whose ``python3`` runs the harness with the standard library only):

* **Offline** (default): ``debootstrap --variant=minbase --include=python3`` builds a Debian root file system from the
  Debian mirror apt already uses (no Docker registry involved), docs/caches are trimmed, and the tree is imported
  with ``docker import`` through the SDK. ``python3-minimal`` is not enough: it lacks ``json``.
* **From a base image** (``--base-image python:3.11-slim``): a two-line Dockerfile on top of an image the engine can
  pull or already has.

Nothing is baked into the image but labels: the harness travels with each container's command line, so the image
never goes stale when the harness changes. What *does* make an image stale is a change of its own inputs (the route,
the Debian suite or base image, the build recipe); :func:`image_inputs` lists them and the image carries their digest
in the label ``llm_marl_envs.sandbox.inputs``. :func:`ensure_image` (what ``llm-marl sandbox build-image`` runs)
builds only when that digest differs or the image is missing, and every build removes the image it replaces, so
rebuilding leaves no dangling image behind.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_marl_envs.core.python_source import parse_python

DEFAULT_IMAGE = "llm-marl-envs/sandbox:py3-bookworm"
"""The image the Docker backend uses unless told otherwise (the one place its tag is spelled)."""

IMAGE_LABEL = "llm_marl_envs.sandbox.image"
INPUTS_LABEL = "llm_marl_envs.sandbox.inputs"
"""Label holding the digest of :func:`image_inputs` the image was built from."""
DEBIAN_SUITE = "bookworm"
"""The Debian release of the offline route; it fixes the image's Python (bookworm ships 3.11)."""
DEBIAN_PACKAGES = ("python3",)
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt", "var/lib/apt/lists")
_IMPORT_CHANGES = (
    "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1",
    f"LABEL {IMAGE_LABEL}=debootstrap-{DEBIAN_SUITE}",
    "WORKDIR /tmp",
    'CMD ["python3"]',
)


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


def build_offline(tag: str = DEFAULT_IMAGE, *, mirror: str | None = None, log: Any = print, inputs: str = "") -> str:
    """Build the image with debootstrap + ``docker import`` (needs root and the Debian mirror, not a registry).

    ``inputs`` is the digest of :func:`image_inputs` to record in :data:`INPUTS_LABEL` (empty: none recorded).
    This builds unconditionally and leaves the image it replaces; :func:`build_image` cleans that up.
    """
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
            ["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", DEBIAN_SUITE, str(rootfs),
             mirror],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for relative in _TRIM:
            shutil.rmtree(rootfs / relative, ignore_errors=True)
        tarball = Path(scratch) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        log(f"importing as {tag}")
        changes = [*_IMPORT_CHANGES, *([f"LABEL {INPUTS_LABEL}={inputs}"] if inputs else [])]
        client.api.import_image_from_file(str(tarball), repository=repository, tag=version, changes=changes)
    return tag


def _dockerfile(base_image: str, inputs: str = "") -> str:
    """The Dockerfile of the base-image route (``inputs``: the digest to record, empty for none)."""
    return (
        f"FROM {base_image}\n"
        f"LABEL {IMAGE_LABEL}=from-{base_image.replace(':', '-')}\n"
        + (f"LABEL {INPUTS_LABEL}={inputs}\n" if inputs else "")
        + "ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1\n"
        "WORKDIR /tmp\n"
    )


def build_from_base(tag: str, base_image: str, *, log: Any = print, inputs: str = "", nocache: bool = False) -> str:
    """Build the image ``FROM base_image`` (an official python image where a registry answers).

    ``inputs`` is the digest to record in :data:`INPUTS_LABEL`; ``nocache`` ignores the engine's build cache.
    """
    client = docker_client()
    log(f"building {tag} from {base_image}")
    client.images.build(fileobj=io.BytesIO(_dockerfile(base_image, inputs).encode()), tag=tag, rm=True, pull=False,
                        nocache=nocache)
    return tag


def _source_digest(*functions: Callable[..., Any]) -> str:
    """Digest of the functions' code: an edit of a build recipe changes the image's inputs.

    Names, docstrings, comments and layout are left out (the code goes through ``ast``), so documenting or renaming
    a builder does not trigger a 100-second rebuild.
    """
    parts = []
    for function in functions:
        tree = parse_python(textwrap.dedent(inspect.getsource(function)))
        definition = tree.body[0]
        if isinstance(definition, ast.FunctionDef):
            definition.name = "recipe"
            if ast.get_docstring(definition) is not None:
                definition.body = definition.body[1:] or [ast.Pass()]
        parts.append(ast.unparse(tree))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def image_inputs(base_image: str | None = None, client: Any | None = None) -> dict[str, str]:
    """What the image is made from; a change of any entry means the image must be rebuilt.

    Offline route: the Debian suite (it fixes the Python version), the packages, the trimmed paths, the image
    settings and the builder's source. Base route: the base image's name *and* the id the engine resolves it to (a
    re-pulled ``python:3.11-slim`` is a new input), the Dockerfile and the builder's source. The harness is not an
    input: it travels with each container's command line, never in the image. Neither is the mirror: any mirror of the
    suite gives the same packages.
    """
    if base_image:
        base = _image_or_none(base_image, client or docker_client())
        return {
            "route": "base",
            "base_image": base_image,
            "base_id": base.id if base is not None else "absent",
            "dockerfile": _dockerfile(base_image),
            "builder": _source_digest(_dockerfile, build_from_base),
        }
    return {
        "route": "offline",
        "suite": DEBIAN_SUITE,
        "packages": ",".join(DEBIAN_PACKAGES),
        "trim": ",".join(_TRIM),
        "changes": "\n".join(_IMPORT_CHANGES),
        "builder": _source_digest(build_offline),
    }


def inputs_digest(inputs: dict[str, str]) -> str:
    """The label value for ``inputs``: a SHA-256 of their canonical JSON."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _image_or_none(tag: str, client: Any) -> Any | None:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def image_is_current(tag: str = DEFAULT_IMAGE, base_image: str | None = None, client: Any | None = None) -> bool:
    """Whether ``tag`` exists and was built from the inputs a build would use now."""
    client = client or docker_client()
    image = _image_or_none(tag, client)
    wanted = inputs_digest(image_inputs(base_image, client))
    return image is not None and (image.labels or {}).get(INPUTS_LABEL) == wanted


def build_image(tag: str = DEFAULT_IMAGE, base_image: str | None = None, *, log: Any = print) -> str:
    """Build the sandbox image offline (debootstrap) or from ``base_image`` now; return its tag.

    The build records the digest of its inputs and removes the image the tag pointed to before (so no dangling image
    is left); an old image still used by a container is kept, with a note in the log.
    """
    client = docker_client()
    if base_image and not image_exists(base_image, client):
        # Pull before taking the inputs, so they name the base's real id; the build would pull it anyway.
        log(f"pulling {base_image}")
        client.images.pull(base_image)
    inputs = inputs_digest(image_inputs(base_image, client))
    previous = _image_or_none(tag, client)
    if base_image:
        # An explicit build must really build: the cache would hand back the same image for the same Dockerfile.
        build_from_base(tag, base_image, log=log, inputs=inputs, nocache=True)
    else:
        build_offline(tag, log=log, inputs=inputs)
    _remove_replaced(previous, tag, client, log)
    return tag


def ensure_image(
    tag: str = DEFAULT_IMAGE, base_image: str | None = None, *, force: bool = False, log: Any = print
) -> bool:
    """Build ``tag`` only when it is missing, its inputs changed, or ``force``; return whether it built.

    A rebuild takes about 100 s and each used to leave the previous image dangling, so the common case (nothing
    changed) must cost one label lookup instead.
    """
    client = docker_client()
    if not force and image_exists(tag, client) and (not base_image or image_exists(base_image, client)):
        if image_is_current(tag, base_image, client):
            log(f"{tag} is up to date (its inputs have not changed; --force rebuilds)")
            return False
        log(f"{tag} was built from other inputs: rebuilding")
    build_image(tag, base_image, log=log)
    return True


def _remove_replaced(previous: Any | None, tag: str, client: Any, log: Any) -> None:
    """Remove the image ``tag`` pointed to before a build, unless the build gave back the same image."""
    import docker.errors

    if previous is None or previous.id == client.images.get(tag).id:
        return
    try:
        # Not forced: an image a container still uses (a live warm pool) or that carries another tag is kept.
        client.images.remove(previous.id)
    except docker.errors.APIError as error:
        log(f"kept the replaced image {previous.short_id}: {error.explanation or error}")
    else:
        log(f"removed the replaced image {previous.short_id}")
