"""``fleetperf images tag|context|build VENDOR``: benchmark images (tui/catalog/images.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tui.commands.common import Subcommand
from tui.core.term import printable


def _arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    tag = sub.add_parser("tag", help="print the expected tag")
    ctx = sub.add_parser(
        "context",
        help="write the build context into DIR; print JSON: tag, context (the label's "
        "hash), build_args (BASE_IMAGE and the allowed --build-arg)",
    )
    build = sub.add_parser("build", help="build the image on a docker engine")
    for q in (tag, ctx, build):
        q.add_argument("vendor")
    for q in (tag, ctx):
        q.add_argument("--base-image", help="base image (default: the Dockerfile's)")
    ctx.add_argument("dir", type=Path)
    build.add_argument(
        "--docker-host", help="engine URL (default: DOCKER_HOST or the local socket)"
    )
    for q in (ctx, build):
        q.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    build.add_argument("--network", help="network of the build's RUN steps (e.g. host)")


def _build_args(pairs: list[str]) -> dict[str, str]:
    bad = [a for a in pairs if "=" not in a]
    if bad:
        raise ValueError(f"--build-arg {bad[0]}: expected KEY=VALUE")
    return dict(a.split("=", 1) for a in pairs)


def cmd_images(args: argparse.Namespace) -> int:
    """Benchmark images (tui/catalog/images.py): the tag, the build context, a build."""
    from tui.catalog import images

    try:
        known = sorted(d.parent.name for d in images.IMAGES.glob("*/Dockerfile"))
        if args.vendor not in known:  # a name, never a path: images/VENDOR/ is read
            raise ValueError(
                f"vendor {args.vendor!r}: no such image (images/VENDOR/Dockerfile is there"
                f" for {', '.join(known)})"
            )
        if args.action == "tag":
            print(images.image_tag(args.vendor, args.base_image))
            return 0
        if args.action == "context":
            build_args = _build_args(args.build_arg)
            build_args["BASE_IMAGE"] = base = images.base_of(
                args.vendor, {**build_args, "BASE_IMAGE": args.base_image or ""}
            )
            images.write_context(args.vendor, args.dir)
            want = images.expected(args.vendor, base)
            print(json.dumps({"tag": want.tag, "context": want.context, "build_args": build_args}))
            return 0
        tag, image_id = images.build(
            args.vendor, args.docker_host, _build_args(args.build_arg), args.network, log=print
        )
    except (ValueError, images.BuildError) as exc:
        print(printable(f"fleetperf images: error: {exc}"), file=sys.stderr)
        return 2
    print(f"{tag} {image_id}")
    return 0


COMMAND = Subcommand(
    "images",
    "benchmark images: the expected tag, the build context, a build",
    _arguments,
    cmd_images,
)
