"""What pins a benchmark image (tui/catalog/images.py, fleetperf_preflight's image check): the
hash covers the base image and pinned requirements, build arguments cannot change the image
behind the tag's back, and a host whose tag names another image is refused before launch
(a real engine from tests/dockerd.py; its images are imported from a one-file root
filesystem, no registry)."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from dockerd import Dockerd, missing
from hostmodules import preflight

from tui import cli
from tui.catalog import images

VENDORS = ("nvidia", "iluvatar", "kunlunxin", "cpu")


@pytest.fixture
def context(tmp_path, monkeypatch):
    """A copy of images/ and the harness that a test may change."""
    shutil.copytree(images.IMAGES, tmp_path / "images")
    shutil.copytree(images.HARNESS, tmp_path / "harness")
    monkeypatch.setattr(images, "IMAGES", tmp_path / "images")
    monkeypatch.setattr(images, "HARNESS", tmp_path / "harness")
    return tmp_path


def test_the_base_image_is_in_the_hash(context):
    first = images.expected("cpu", "python:3.11-slim-bookworm")
    assert first == images.expected("cpu")  # the Dockerfile's default, said or not
    assert first.tag == f"fleetperf/cpu:{first.context[:12]}"
    for other in (
        "python:3.12-slim-bookworm",
        "python:3.11-slim-bookworm@sha256:" + "0" * 64,  # the same tag, pinned by digest
    ):
        assert images.image_tag("cpu", other) != first.tag, other
    dockerfile = context / "images" / "cpu" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("3.11-slim", "3.13-slim"))
    assert images.default_base("cpu") == "python:3.13-slim-bookworm"
    assert images.image_tag("cpu") != first.tag


def test_a_requirement_line_changes_the_hash(context):
    first = images.image_tag("cpu")
    path = context / "images" / "cpu" / "requirements.txt"
    path.write_text(path.read_text().replace("psutil==7.2.2", "psutil==7.2.1"))
    assert images.image_tag("cpu") != first


@pytest.mark.parametrize("vendor", VENDORS)
def test_requirements_are_pinned(vendor):
    """An unpinned line resolves to whatever is newest at build time, under an unchanged tag."""
    lines = (REPO / "images" / vendor / "requirements.txt").read_text().splitlines()
    wanted = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    assert wanted, vendor
    for line in wanted:
        assert re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.+!-]*", line), f"{vendor}: {line}"


@pytest.mark.parametrize("vendor", VENDORS)
def test_group_vars_base_image_is_the_dockerfiles(vendor):
    """The hosts build on fleetperf_base_image; the tag says which, and by default the two agree."""
    group_vars = yaml.safe_load((REPO / "playbooks" / "group_vars" / f"{vendor}.yml").read_text())
    assert group_vars["fleetperf_base_image"] == images.default_base(vendor)


def test_build_arguments_that_change_the_image_are_refused(tmp_path, capsys):
    ok = cli.main(
        [
            "images",
            "context",
            "cpu",
            str(tmp_path / "a"),
            "--base-image",
            "b:1",
            "--build-arg=PIP_NO_INDEX=1",
        ]
    )
    assert ok == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "tag": images.image_tag("cpu", "b:1"),
        "context": images.context_hash("cpu", "b:1"),
        "build_args": {"PIP_NO_INDEX": "1", "BASE_IMAGE": "b:1"},
    }
    bad = cli.main(
        ["images", "context", "cpu", str(tmp_path / "b"), "--build-arg=TORCH_VERSION=2.0.0"]
    )
    assert bad == 2
    err = capsys.readouterr().err
    assert "build argument TORCH_VERSION: changes what the image holds but not its tag" in err
    assert not (tmp_path / "b").exists()


def test_the_record_names_the_image_that_ran():
    tag = "fleetperf/cpu:0123456789ab"
    assert images.ran(tag, {}) == tag
    one = {"n1": "sha256:" + "a" * 64, "n2": "sha256:" + "a" * 64}
    assert images.ran(tag, one) == f"{tag}@sha256:{'a' * 64}"
    two = {"n1": "sha256:" + "a" * 64, "n2": "sha256:" + "b" * 64}
    assert images.ran(tag, two) == f"{tag}@n1=sha256:{'a' * 64},n2=sha256:{'b' * 64}"


# --- the preflight's image check, against a real engine -----------------------------


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    if missing():
        pytest.skip(missing())
    d = Dockerd(tmp_path_factory.mktemp("engine"))
    d.start()
    try:
        yield d
    finally:
        d.stop()
        d.remove_data()


def import_image(engine: Dockerd, tmp: Path, tag: str, text: str, labels: dict[str, str]) -> str:
    """An image of one file, imported under ``tag`` with ``labels``; returns its id."""
    rootfs = tmp / f"{abs(hash(text))}.tar"
    with tarfile.open(rootfs, "w") as tar:
        info = tarfile.TarInfo("etc/fleetperf-image")
        info.size = len(text.encode())
        tar.addfile(info, io.BytesIO(text.encode()))
    changes = [arg for k, v in labels.items() for arg in ("--change", f"LABEL {k}={v}")]
    engine.docker("import", *changes, str(rootfs), tag)
    return engine.docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


def check(engine: Dockerd, tmp: Path, want: images.Expected) -> dict:
    """A docker host's preflight, its image check first (run.yml)."""
    res, _ = preflight(
        tmp,
        run_id=f"run-{time.monotonic_ns()}",
        host="box1",
        executor="docker",
        docker_host=engine.host,
        image=want.tag,
        image_context=want.context,
        build_command="fleetperf images build cpu",
    )
    return res


@pytest.mark.slow
def test_a_tag_repointed_at_another_image_is_refused(engine, tmp_path):
    want = images.expected("cpu")
    good = import_image(engine, tmp_path, want.tag, "built", {images.LABEL: want.context})
    res = check(engine, tmp_path, want)
    assert not res.get("failed") and res["image_id"] == good, res

    # Another image (labelled for another context, or not at all) under the expected tag.
    for labels, built in (
        ({images.LABEL: "f" * 64}, "built from context ffffffffffff"),
        ({}, f"without the {images.LABEL} label"),
    ):
        other = import_image(engine, tmp_path, "elsewhere/image:1", str(labels), labels)
        engine.docker("tag", "elsewhere/image:1", want.tag)
        res = check(engine, tmp_path, want)
        assert res.get("failed"), res
        assert res["msg"] == (
            f"host box1: image {want.tag} is {other}, {built}, not from {want.context[:12]}:"
            " the tag points at another image;"
            " build it with: fleetperf images build cpu"
        )
    engine.docker("rmi", "-f", want.tag, "elsewhere/image:1", good)
