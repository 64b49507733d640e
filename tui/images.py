"""Benchmark images: their build context, a tag from its hash, and the build itself.

The context of vendor V is images/V/ (Dockerfile, requirements) plus the workload harness
(cases/harness, as harness/). The tag is fleetperf/V:<first 12 hex of a sha256 over every
file's path and bytes>, so a changed Dockerfile, requirement pin or harness file makes a
new tag; a host holding only the old image is refused by run.yml's preflight instead of
running stale code.

    .venv/bin/python -m tui.images tag cpu
    .venv/bin/python -m tui.images context cpu DIR     # the context, for a build elsewhere
    .venv/bin/python -m tui.images build cpu [--docker-host URL] [--build-arg K=V]... [--network N]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shutil
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from tui.catalog import REPO_ROOT

IMAGES = REPO_ROOT / "images"
HARNESS = REPO_ROOT / "cases" / "harness"
REPOSITORY = "fleetperf"  # images are fleetperf/<vendor>:<hash>


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


def context_hash(vendor: str) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(context_files(vendor).items()):
        data = path.read_bytes()
        # Lengths delimit the fields: no two different contexts hash alike.
        digest.update(f"{len(name)}:{name}:{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def image_tag(vendor: str) -> str:
    """The tag the controller expects on a host of ``vendor``."""
    return f"{REPOSITORY}/{vendor}:{context_hash(vendor)[:12]}"


def expected_image(vendor: str) -> str | None:
    """The tag run.yml's preflight insists on for docker hosts of ``vendor``; None for a
    vendor without images/<vendor> (its hosts can only run processes)."""
    return image_tag(vendor) if (IMAGES / vendor / "Dockerfile").is_file() else None


def write_context(vendor: str, dest: Path) -> None:
    """Write the build context into ``dest`` (for builds elsewhere, e.g. provisioning)."""
    for name, path in context_files(vendor).items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


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
    """Build ``vendor``'s image with the Docker SDK; returns (tag, image id)."""
    import docker  # the controller needs the SDK only to build

    tag = image_tag(vendor)
    client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
    try:
        stream = client.api.build(
            fileobj=context_tar(vendor),
            custom_context=True,
            tag=tag,
            buildargs=build_args or {},
            network_mode=network_mode,
            labels={"org.fleetperf.context": context_hash(vendor)},
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tui.images", description="benchmark images")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("tag", help="print the expected tag").add_argument("vendor")
    ctx = sub.add_parser("context", help="write the build context into DIR; print the tag")
    ctx.add_argument("vendor")
    ctx.add_argument("dir", type=Path)
    b = sub.add_parser("build", help="build the image on a docker engine")
    b.add_argument("vendor")
    b.add_argument("--docker-host", help="engine URL (default: DOCKER_HOST or the local socket)")
    b.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--network", help="network of the build's RUN steps (e.g. host)")
    args = ap.parse_args(argv)
    try:
        if args.command == "tag":
            print(image_tag(args.vendor))
            return 0
        if args.command == "context":
            write_context(args.vendor, args.dir)
            print(image_tag(args.vendor))
            return 0
        bad = [a for a in args.build_arg if "=" not in a]
        if bad:
            raise ValueError(f"--build-arg {bad[0]}: expected KEY=VALUE")
        tag, image_id = build(
            args.vendor,
            args.docker_host,
            dict(a.split("=", 1) for a in args.build_arg),
            args.network,
            log=print,
        )
    except (ValueError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
