"""Benchmark images: their build context, a tag from its hash, and the build itself.

The context of vendor V is images/V/ (Dockerfile, pinned requirements) plus the workload
harness (cases/harness, as harness/). The tag is fleetperf/V:<first 12 hex of a sha256
over every file's path and bytes and the base image reference>, so a changed Dockerfile,
requirement pin, harness file or base image makes a new tag. A build stores the whole
hash as the image's label org.fleetperf.context; run.yml's preflight refuses a host whose
image under the tag lacks it (missing, stale, or the tag re-pointed at another image)
instead of running other code.

The base image is the Dockerfile's ``ARG BASE_IMAGE=`` default unless one is given
(fleetperf_base_image in playbooks/group_vars; with @sha256:<digest> it is pinned too).
Other build arguments may only say where packages come from (SOURCE_ARGS): what the
image holds is in the hash.

    .venv/bin/fleetperf images tag cpu [--base-image REF]
    .venv/bin/fleetperf images context cpu DIR [--base-image REF]   # JSON: tag, context
    .venv/bin/fleetperf images build cpu [--docker-host URL] [--build-arg K=V]... [--network N]

(their arguments and output: tui/commands/images.py).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tui.catalog import caseimports
from tui.core import safefile
from tui.core.paths import REPO_ROOT

IMAGES = REPO_ROOT / "images"
HARNESS = REPO_ROOT / "cases" / "harness"
REPOSITORY = "fleetperf"  # images are fleetperf/<vendor>:<hash>
LABEL = "org.fleetperf.context"  # the whole hash, set at build, checked before a launch
BASE_LABEL = "org.fleetperf.base"  # the base image reference, for people
# Build arguments that say only where packages come from (an offline wheel mirror,
# proxies), never what the image holds: left out of the hash. Any other argument but
# BASE_IMAGE is refused: change the Dockerfile instead, which makes a new tag.
SOURCE_ARGS = frozenset(
    {"PIP_FIND_LINKS", "PIP_NO_INDEX"}
    | {p for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY") for p in (name, name.lower())}
)


# What each vendor's base image (or the Dockerfile, before requirements.txt) installs that
# case code imports, by distribution name, and where it comes from: the vendor's own builds,
# matched to the host's driver, never from requirements.txt. With the requirements it is what
# a case may import on a docker host of the vendor (tui/catalog/caseimports.py; docs/containers.md).
BASE_PACKAGES: dict[str, dict[str, str]] = {
    "cpu": {"torch": "Dockerfile, TORCH_VERSION from the CPU wheel index"},
    "nvidia": {"torch": "Dockerfile, TORCH_VERSION from PyPI (CUDA libraries as wheels)"},
    "iluvatar": {"torch": "the base image: Iluvatar's CoreX build"},
    "kunlunxin": {"torch": "the base image: Kunlunxin's XPyTorch build"},
}


class Expected(NamedTuple):
    """The image a docker host must run: its tag and the context hash in its label."""

    tag: str
    context: str


def _files(top: Path) -> list[Path]:
    return sorted(
        p
        for p in top.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def context_files(vendor: str) -> dict[str, Path]:
    """The build context of ``vendor``'s image: name inside the context -> file."""
    src = IMAGES / vendor
    if not (src / "Dockerfile").is_file():
        raise ValueError(f"images/{vendor}/Dockerfile: no such file")
    files = {p.relative_to(src).as_posix(): p for p in _files(src)}
    files.update({f"harness/{p.relative_to(HARNESS).as_posix()}": p for p in _files(HARNESS)})
    return files


def default_base(vendor: str) -> str:
    """The base image the Dockerfile names (``ARG BASE_IMAGE=REF``)."""
    text = (IMAGES / vendor / "Dockerfile").read_text()
    found = re.search(r"^ARG BASE_IMAGE=(\S+)\s*$", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"images/{vendor}/Dockerfile: no ARG BASE_IMAGE=<image> default")
    return found.group(1)


def context_hash(vendor: str, base_image: str | None = None) -> str:
    """sha256 over the context's files and the base image (default: the Dockerfile's)."""
    digest = hashlib.sha256()
    fields = [("BASE_IMAGE", (base_image or default_base(vendor)).encode())]
    fields += [(name, path.read_bytes()) for name, path in sorted(context_files(vendor).items())]
    for name, data in fields:
        # Lengths delimit the fields: no two different contexts hash alike.
        digest.update(f"{len(name)}:{name}:{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def expected(vendor: str, base_image: str | None = None) -> Expected:
    """The tag and label the controller expects on a host of ``vendor`` whose
    fleetperf_base_image is ``base_image``."""
    context = context_hash(vendor, base_image)
    return Expected(f"{REPOSITORY}/{vendor}:{context[:12]}", context)


def image_tag(vendor: str, base_image: str | None = None) -> str:
    return expected(vendor, base_image).tag


def has_image(vendor: str) -> bool:
    """Whether ``vendor`` has images/<vendor> (else its hosts can only run processes)."""
    return (IMAGES / vendor / "Dockerfile").is_file()


def expected_image(vendor: str, base_image: str | None = None) -> str | None:
    """The tag run.yml's preflight insists on for docker hosts of ``vendor``; None for a
    vendor without images/<vendor>."""
    return image_tag(vendor, base_image) if has_image(vendor) else None


def provided(vendor: str) -> set[str]:
    """The distributions (normalized names) ``vendor``'s image holds for case code: its
    requirements.txt lines (``name==version``) and BASE_PACKAGES."""
    lines = (IMAGES / vendor / "requirements.txt").read_text().splitlines()
    pinned = {ln.split("==")[0].strip() for ln in lines if ln.strip()[:1] not in ("", "#")}
    return {caseimports.normalize(d) for d in pinned | set(BASE_PACKAGES.get(vendor, {}))}


def lacks(vendor: str, case_dir: Path, entrypoint: str) -> str | None:
    """What ``vendor``'s image lacks of the distributions the case at ``case_dir`` imports
    (one line naming them and the requirements file), or None when it has them all."""
    imports = caseimports.required(case_dir, entrypoint, HARNESS)
    missing = caseimports.lacking(imports, provided(vendor))
    if not missing:
        return None
    what = ", ".join(
        f"{dist} (import {', '.join(mods)} in {imports[mods[0]][0]})"
        for dist, mods in sorted(missing.items())
    )
    return (
        f"images/{vendor}/requirements.txt lacks {what}, which the case imports and the "
        f"{vendor} base image does not bring: pin each there (name==version), rebuild the image"
    )


def ran(tag: str, image_ids: dict[str, str]) -> str:
    """The record's image: the tag and the id (sha256 of the image's configuration, as
    docker inspect gives it) that ran, ``TAG@sha256:...``; where hosts built their own
    images and the ids differ, each host's: ``TAG@host1=sha256:...,host2=sha256:...``."""
    if not image_ids:
        return tag
    if len(set(image_ids.values())) == 1:
        return f"{tag}@{next(iter(image_ids.values()))}"
    return f"{tag}@" + ",".join(f"{host}={i}" for host, i in image_ids.items())


def base_of(vendor: str, build_args: dict[str, str]) -> str:
    """The base image of a build with ``build_args``; other arguments than BASE_IMAGE and
    SOURCE_ARGS are refused (they would change the image without changing its tag)."""
    bad = sorted(set(build_args) - SOURCE_ARGS - {"BASE_IMAGE"})
    if bad:
        raise ValueError(
            f"build argument {bad[0]}: changes what the image holds but not its tag; "
            f"change images/{vendor}/Dockerfile instead (allowed: BASE_IMAGE, "
            f"{', '.join(sorted(SOURCE_ARGS))})"
        )
    return build_args.get("BASE_IMAGE") or default_base(vendor)


def write_context(vendor: str, dest: Path) -> None:
    """Write the build context into ``dest`` (for builds elsewhere, e.g. provisioning)."""
    for name, path in context_files(vendor).items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        safefile.write_bytes(target, path.read_bytes(), mode=0o644)  # what docker build reads


def context_tar(vendor: str) -> io.BytesIO:
    """The context as the tar stream a docker build takes (fixed owners and times)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, path in sorted(context_files(vendor).items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = path.stat().st_size, 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


class BuildError(Exception):
    """An image build that failed; the message is one line."""


def build(
    vendor: str,
    docker_host: str | None = None,
    build_args: dict[str, str] | None = None,
    network_mode: str | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> tuple[str, str]:
    """Build ``vendor``'s image with the Docker SDK, labelled with its context hash;
    returns (tag, image id)."""
    import docker  # the controller needs the SDK only to build

    build_args = {**(build_args or {})}
    build_args["BASE_IMAGE"] = base = base_of(vendor, build_args)
    tag, context = expected(vendor, base)
    client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
    try:
        stream = client.api.build(
            fileobj=context_tar(vendor),
            custom_context=True,
            tag=tag,
            buildargs=build_args,
            network_mode=network_mode,
            labels={LABEL: context, BASE_LABEL: base},
            rm=True,
            forcerm=True,
            decode=True,
        )
        image_id, last = None, ""
        for chunk in stream:
            if "error" in chunk:
                why = chunk["error"].strip().splitlines()[0]
                raise BuildError(f"image {tag}: build failed: {why} (last output: {last})")
            if "stream" in chunk and chunk["stream"].strip():
                log(chunk["stream"].rstrip("\n"))
                last = chunk["stream"].strip().splitlines()[-1]
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
        return tag, image_id or client.images.get(tag).id
    except docker.errors.DockerException as exc:
        raise BuildError(f"image {tag}: {str(exc).splitlines()[0]}") from exc
    finally:
        client.close()
