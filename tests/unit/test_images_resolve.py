"""Each image's pins install together on its base's torch (issue 27 point 5).

pip resolves every image's requirements.txt (and an engine's engine-requirements.txt)
beside ``torch==<the base's version>`` without installing anything (``--dry-run
--report``, metadata from the package index): the base's torch must stay as it is (a pin
that needs another torch fails the build's constraints), and each resolved package that
declares a torch range for its torch backend (transformers'
``extra == "torch"``) must take the base's. The base's torch: ``ARG TORCH_VERSION`` in the
Dockerfile where the image installs it (cpu, nvidia), else the ``# base: torch==X
[python==Y]`` line of requirements.txt (the vendor's own build in iluvatar's and kunlunxin's
base images, as the seeds ran them). A declared Python resolves wheels for that Python.

Slow: it asks the package index, about a minute an image.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from harness.vendors import VENDORS
from packaging.requirements import Requirement
from packaging.version import Version

BASE = re.compile(r"^# base: torch==(?P<torch>\S+)(?: python==(?P<python>\S+))?$", re.M)
TORCH_ARG = re.compile(r"^ARG TORCH_VERSION=(?P<torch>\S+)$", re.M)


def base_stack(vendor: str) -> tuple[str, str | None]:
    """(the base image's torch version, its Python where it is not this interpreter's)."""
    folder = REPO / "images" / vendor
    if found := TORCH_ARG.search((folder / "Dockerfile").read_text()):
        return found["torch"], None
    found = BASE.search((folder / "requirements.txt").read_text())
    assert found, f"images/{vendor}/requirements.txt: no '# base: torch==X' line"
    return found["torch"], found["python"]


def test_every_image_names_its_base_torch() -> None:
    for vendor in VENDORS:
        torch, _ = base_stack(vendor)
        assert Version(torch), vendor


# Each image's requirement files: the workload's, and an engine's environment of its own
# where the image has one (images/nvidia/engine-requirements.txt: vLLM).
FILES = [
    (vendor, name)
    for vendor in VENDORS
    for name in ("requirements.txt", "engine-requirements.txt")
    if (REPO / "images" / vendor / name).is_file()
]


@pytest.mark.slow
@pytest.mark.parametrize(("vendor", "name"), FILES)
def test_pins_resolve_on_the_base_torch(vendor: str, name: str, tmp_path: Path) -> None:
    torch, python = base_stack(vendor)
    report = tmp_path / "report.json"
    wheels = ["--python-version", python, "--only-binary=:all:"] if python else []
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q"]
    argv += [*wheels, "--report", str(report), f"torch=={torch}"]
    argv += ["-r", str(REPO / "images" / vendor / name)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"images/{vendor}: {done.stderr[-3000:]}"
    resolved = {
        i["metadata"]["name"].lower(): i["metadata"]
        for i in json.loads(report.read_text())["install"]
    }
    # public version: a local wheel of the same release (2.13.0+cpu) is the same torch
    got = Version(resolved["torch"]["version"]).public
    assert got == torch, f"images/{vendor}: the base's torch {torch} replaced by {got}"
    for name, meta in resolved.items():
        for line in meta.get("requires_dist") or []:
            req = Requirement(line)
            if req.name == "torch" and req.marker and req.marker.evaluate({"extra": "torch"}):
                assert req.specifier.contains(torch), (
                    f"images/{vendor}: {name} {meta['version']} wants torch{req.specifier} for "
                    f"its torch backend; the base has {torch}"
                )
