"""``fleetperf store export|import``: runs between stores as JSON lines (docs/store.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands import common
from tui.commands.common import Subcommand
from tui.core.term import printable


def _arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    export = sub.add_parser("export", help="every run as JSON lines (to stdout, or -o FILE)")
    export.add_argument("-o", "--output", type=Path, default=None, help="the file to write")
    load = sub.add_parser("import", help="the runs of an export that the store lacks")
    load.add_argument("file", type=Path)
    for q in (export, load):
        q.add_argument("--results", type=Path, default=None)
        common.store_argument(q)


def cmd_store(args: argparse.Namespace) -> int:
    """``store export``: every run as JSON lines; ``store import FILE``: the runs the store
    lacks (tui/engine/storeops.py)."""
    from tui.engine import storeops  # the store's database libraries: loaded now

    session = common.session(args)
    if args.action == "import":
        done = storeops.import_runs(session, args.file)
        print(
            printable(
                f"imported {done.count} run(s) into {done.where}; {done.identical} already"
                f" there (identical), {len(done.different)} already there with another record"
            )
        )
        for run_id in done.different:
            print(
                printable(f"fleetperf: run {run_id}: kept {done.where}'s record"), file=sys.stderr
            )
        return 1 if done.different else 0
    if args.output is None:
        storeops.export_runs(session, sys.stdout)
        return 0
    with common.writing(args.output):
        done = storeops.export_runs(session, args.output)
    print(printable(f"wrote {args.output} ({done.count} run(s) from {done.where})"))
    return 0


COMMAND = Subcommand(
    "store",
    "move runs between stores: export (JSON lines), import",
    _arguments,
    cmd_store,
    "export: every run of the store as JSON lines, a header first (docs/store.md);"
    " import FILE: the runs of an export the store lacks (a run id it has is skipped,"
    " its record kept).",
)
