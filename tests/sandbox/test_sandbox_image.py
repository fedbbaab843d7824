"""``llm-marl sandbox build-image`` builds only when the image's inputs changed, and leaves no dangling image.

The rules run against a fake engine (no Docker needed, no 100-second builds); one Docker test checks them on the real
engine through the fast base-image route, with the sandbox image itself as the base.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from sandbox_fixtures import need_docker

from llm_marl_envs.sandbox import image
from llm_marl_envs.sandbox.image import DEFAULT_IMAGE, INPUTS_LABEL

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class FakeImage:
    id: str
    labels: dict[str, str]

    @property
    def short_id(self) -> str:
        return self.id[:12]


@dataclass
class FakeImages:
    """The engine's image store, as far as ``image.py`` uses it: tags point at images; untagged ones dangle."""

    by_id: dict[str, FakeImage] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    in_use: set[str] = field(default_factory=set)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def get(self, name: str) -> FakeImage:
        key = self.tags.get(name, name)
        if key not in self.by_id:
            raise docker.errors.ImageNotFound(name)
        return self.by_id[key]

    def remove(self, image_id: str) -> None:
        if image_id in self.in_use:
            raise docker.errors.APIError("conflict", explanation="image is being used by a running container")
        del self.by_id[image_id]

    def put(self, tag: str, labels: dict[str, str]) -> FakeImage:
        made = FakeImage(f"sha256:{next(self.ids):064x}", labels)
        self.by_id[made.id] = made
        self.tags[tag] = made.id
        return made

    def dangling(self) -> list[str]:
        return [i for i in self.by_id if i not in self.tags.values()]


class FakeClient:
    def __init__(self) -> None:
        self.images = FakeImages()


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeClient, list[str]]:
    """A fake engine behind ``docker_client`` and an offline builder that records each build."""
    client = FakeClient()
    builds: list[str] = []

    def fake_build_offline(tag: str, *, log: Any = print, inputs: str = "", mirror: str | None = None) -> str:
        builds.append(tag)
        client.images.put(tag, {INPUTS_LABEL: inputs} if inputs else {})
        return tag

    monkeypatch.setattr(image, "docker_client", lambda: client)
    monkeypatch.setattr(image, "build_offline", fake_build_offline)
    return client, builds


def quiet(*_: object) -> None:
    """A log that drops its lines."""


def test_unchanged_inputs_do_not_rebuild(engine: tuple[FakeClient, list[str]]) -> None:
    client, builds = engine
    assert image.ensure_image(log=quiet) is True  # missing: built
    first = client.images.get(DEFAULT_IMAGE)
    assert first.labels[INPUTS_LABEL] == image.inputs_digest(image.image_inputs())
    assert image.ensure_image(log=quiet) is False  # same inputs: nothing to do
    assert builds == [DEFAULT_IMAGE] and client.images.get(DEFAULT_IMAGE) is first
    assert image.image_is_current(DEFAULT_IMAGE)


def test_force_and_changed_inputs_rebuild_and_remove_the_old_image(
    engine: tuple[FakeClient, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, builds = engine
    image.ensure_image(log=quiet)
    assert image.ensure_image(force=True, log=quiet) is True
    monkeypatch.setattr(image, "DEBIAN_SUITE", "trixie")  # another suite is another Python: a new input
    assert not image.image_is_current(DEFAULT_IMAGE)
    assert image.ensure_image(log=quiet) is True
    assert len(builds) == 3
    assert client.images.dangling() == [] and len(client.images.by_id) == 1  # each build removed its predecessor


def test_an_image_without_the_inputs_label_is_rebuilt(engine: tuple[FakeClient, list[str]]) -> None:
    client, builds = engine
    client.images.put(DEFAULT_IMAGE, {image.IMAGE_LABEL: "debootstrap-bookworm"})  # built before the label existed
    assert image.ensure_image(log=quiet) is True and len(builds) == 1
    assert client.images.dangling() == []


def test_a_replaced_image_still_in_use_is_kept_and_said(engine: tuple[FakeClient, list[str]]) -> None:
    client, _ = engine
    old = client.images.put(DEFAULT_IMAGE, {})
    client.images.in_use.add(old.id)
    lines: list[str] = []
    image.ensure_image(log=lines.append)
    assert client.images.dangling() == [old.id]
    assert lines[-1].startswith(f"kept the replaced image {old.short_id}: image is being used")


def test_inputs_track_the_recipe_code_not_its_docstrings() -> None:
    def recipe_a() -> str:
        """One wording."""
        return "debootstrap"

    def recipe_b() -> str:
        """Another wording, same code."""
        # a comment changes nothing either
        return "debootstrap"

    def recipe_c() -> str:
        """One wording."""
        return "debootstrap --include=python3-full"

    assert image._source_digest(recipe_a) == image._source_digest(recipe_b)
    assert image._source_digest(recipe_a) != image._source_digest(recipe_c)
    offline = image.image_inputs()
    assert offline["route"] == "offline" and offline["suite"] == image.DEBIAN_SUITE
    assert "harness" not in " ".join(offline)  # the harness travels on the command line, never in the image


def _dangling(client: Any) -> set[str]:
    return {i.id for i in client.images.list(filters={"dangling": True})}


@pytest.mark.docker
def test_real_engine_builds_once_and_leaves_no_dangling_image() -> None:
    """The base-image route on the real engine, FROM the sandbox image (seconds, no registry)."""
    need_docker()
    client = image.docker_client()
    tag = "llm-marl-envs/sandbox:test-inputs"
    dangling_before = _dangling(client)
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(tag, force=True)
    try:
        assert image.ensure_image(tag, DEFAULT_IMAGE, log=quiet) is True
        built = client.images.get(tag)
        assert built.labels[INPUTS_LABEL] == image.inputs_digest(image.image_inputs(DEFAULT_IMAGE, client))
        assert image.ensure_image(tag, DEFAULT_IMAGE, log=quiet) is False
        assert client.images.get(tag).id == built.id

        cli = [sys.executable, "-m", "llm_marl_benchmarks.cli", "sandbox", "build-image", "--tag", tag,
               "--base-image", DEFAULT_IMAGE]
        done = subprocess.run(cli, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0 and "is up to date" in done.stdout, done.stdout + done.stderr
        assert client.images.get(tag).id == built.id

        assert image.ensure_image(tag, DEFAULT_IMAGE, force=True, log=quiet) is True
        rebuilt = client.images.get(tag)
        assert rebuilt.id != built.id
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(built.id)  # the replaced image is gone, not left dangling
        assert _dangling(client) <= dangling_before
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(tag, force=True)
