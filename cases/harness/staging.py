"""A case's ``prepare.py``: one entry point (``prepare_main``) for ``--synthetic`` and
``--from DIR``, one error style (``InputError``: one line naming the file, exit 2), and the
data manifest; and staging an operator's real files into a data directory."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import InputError

# Written into the case's data directory: how the data was made (the preflight reads it into
# the record's synthetic_data). The one definition: the controller imports it from here, so
# this module imports nothing beyond the standard library and harness.errors (no torch).
DATA_MANIFEST = "fleetperf-data.json"


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` as ``dst`` (replacing it), copying where a link cannot cross
    filesystems: a staged checkpoint costs no space and the original is never modified."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)


def find_dir(src: Path, names: Sequence[str]) -> Path:
    """The first of ``names`` that is a directory in ``src``: a layout's directory under the
    names a source may give it (FlagPerf's first); InputError naming the first if none is."""
    for name in names:
        if (src / name).is_dir():
            return src / name
    also = f" (or {', '.join(names[1:])})" if len(names) > 1 else ""
    raise InputError(f"missing data: {src / names[0]}/{also}")


def write_manifest(out: Path, src: Path | None) -> None:
    manifest = {
        "synthetic": src is None,
        "source": str(src) if src is not None else None,
        "prepared": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (out / DATA_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def prepare_main(
    file: str,
    doc: str | None,
    synthetic: Callable[[Path, argparse.Namespace], None],
    *,
    real_data: str,
    stage: Callable[[Path, Path], None] | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """``prepare.py --out DATA_DIR (--synthetic | --from DIR) [--seed N] [options]``.

    ``synthetic(out, args)`` writes the tiny offline set (seeded by ``args.seed``);
    ``stage(src, out)`` checks an operator's directory, raising InputError on the first
    missing or malformed file before anything is staged, then stages it (``link_or_copy``);
    ``real_data`` says what ``--from DIR`` must hold. Writes the data manifest on success.
    Returns the exit code: 0, or 2 with one line on stderr.
    """
    case = Path(file).resolve().parent.name
    parser = argparse.ArgumentParser(description=(doc or case).strip().split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the case's data directory")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", action="store_true", help="tiny offline model and data")
    source.add_argument("--from", dest="src", type=Path, help="a directory of the real files")
    parser.add_argument("--seed", type=int, default=1234)
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    out: Path = args.out
    # Staging runs no accelerator code, but transformers' save_pretrained imports accelerate,
    # which imports an installed deepspeed: unset, it warns on stdout that no GPU was found.
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        if args.synthetic:
            out.mkdir(parents=True, exist_ok=True)
            synthetic(out, args)
            write_manifest(out, None)
            print(f"wrote synthetic {case} data to {out}")
            return 0
        if args.src is None or stage is None:
            how = "--from DIR" if stage is not None else "the real files placed"
            raise InputError(
                f"pass --synthetic, or {how} holding {real_data}; nothing staged in {out}"
            )
        src = args.src.resolve()
        if not src.is_dir():
            raise InputError(f"{src}: not a directory")
        stage(src, out)
        write_manifest(out, src)
        print(f"staged {src} into {out}")
        return 0
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
