"""``fleetperf results [RUN_ID]``: tables from the results store, one run in full, --prune."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tui.catalog import catalog
from tui.commands import common
from tui.commands.common import Subcommand
from tui.core.errors import CatalogError, UsageError
from tui.core.term import printable
from tui.engine.session import Session, check_run_id
from tui.results.interrupted import interrupted_line
from tui.results.record import STATUSES, RunRecord
from tui.results.tables import (
    FORMATS,
    config_env_text,
    hp_text,
    monitoring_text,
    peak_text,
    render,
)

MAX_DAYS = 36525  # --older-than: a century; past it, no run is that old


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?")
    p.add_argument("--case", default=None)
    p.add_argument("--format", choices=FORMATS, default="md")
    p.add_argument("--results", type=Path, default=None)
    common.store_argument(p, several=True)
    p.add_argument(
        "--status",
        choices=("all", *STATUSES),
        default=None,
        help="runs with this status only (default: passed; all: every run)",
    )
    p.add_argument(
        "--prune",
        action="store_true",
        help="remove the selected runs (by run id, --status or --older-than) from the store,"
        " with their run directories",
    )
    p.add_argument(
        "--older-than", metavar="DAYS", help=f"runs started DAYS ago or before (0 to {MAX_DAYS})"
    )


def _select(args: argparse.Namespace, every: list[RunRecord]) -> tuple[list[RunRecord], int]:
    """The runs of the case the filters keep, and how many others they hid."""
    status = args.status or ("all" if args.prune else "passed")
    chosen = [r for r in every if status in ("all", r.status)]
    if args.older_than is not None:
        cutoff = datetime.now(UTC) - timedelta(days=args.older_than)
        chosen = [r for r in chosen if datetime.fromisoformat(r.started) < cutoff]
    return chosen, len(every) - len(chosen)


def _days(text: str) -> float:
    """``--older-than``'s value: a finite number of days, refused before the store is read
    (nan and inf ended in a traceback; a negative value selected every run to prune)."""
    try:
        days = float(text)
    except ValueError:
        days = math.nan
    if not math.isfinite(days):
        raise UsageError(f"--older-than {text}: expected a number of days, e.g. 30")
    if days < 0:
        raise UsageError(f"--older-than {text}: expected a number of days, not negative")
    if days > MAX_DAYS:
        raise UsageError(f"--older-than {text}: expected a number of days, at most {MAX_DAYS}")
    return days


def cmd_results(args: argparse.Namespace) -> int:
    if args.older_than is not None:  # checked before the store is opened
        args.older_than = _days(args.older_than)
    if args.prune and not (args.run_id or args.status or args.older_than is not None):
        raise UsageError("--prune: name the runs (RUN_ID, --status or --older-than)")
    if args.prune and args.run_id:
        check_run_id(args.run_id, "--prune")
    if len(common.stores(args)) > 1:
        if args.prune:
            raise UsageError("--prune: one store at a time (--store given more than once)")
        merged = common.read_stores(args)
        if args.run_id:
            records, hidden = [merged.find(args.run_id)], 0
        else:
            records, hidden = _select(
                args, [r for r in merged.records if args.case in (None, r.case)]
            )
    else:
        session = common.session(args)
        try:
            for record in session.open_store(create=False):
                print(printable(interrupted_line(record)), file=sys.stderr)
            if args.run_id:  # the whole id, a unique prefix, or the short form tables show
                records, hidden = [session.find_run(args.run_id)], 0
            else:
                records, hidden = _select(args, session.runs(case=args.case))
            if args.prune:
                return _prune(session, records)
        finally:
            session.close()
    if records or args.format != "md":  # JSON and CSV stay machine-readable when empty
        print(printable(render(records, args.format, ids=True)))
        if args.run_id and args.format == "md":  # one run: hp, notes, MFU's peak, energy, env
            print("\n" + printable(hp_text(records[0], _configured_hp(records[0]))))
            print("\n" + printable(notes_text(records[0])))
            print("\n" + printable(peak_text(records[0])))
            print("\n" + printable(monitoring_text(records[0])))
            print("\n" + printable(config_env_text(records[0])))
    else:
        which = "" if args.status == "all" else f"{args.status or 'passed'} "
        print(f"no {which}runs" + (f" of case {args.case}" if args.case else "") + " in the store")
    if hidden and args.format == "md":
        print(f"({hidden} run(s) with another status hidden: --status all shows them)")
    return 0


def _configured_hp(record: RunRecord) -> dict[str, object] | None:
    """What the run's config resolves to in this checkout (case defaults < config); None
    where the case or config is not here (another controller's, or renamed)."""
    try:
        case = catalog.load_case(record.case)
        config = catalog.load_config(case, f"{record.vendor}/{record.config}")
    except CatalogError:
        return None
    return {**case.defaults, **config.overrides}


def notes_text(record: RunRecord) -> str:
    """The workload's and the controller's notes on one run, one a line."""
    if not record.notes:
        return "notes: none"
    return "notes:\n" + "\n".join(f"  - {note}" for note in record.notes)


def _prune(session: Session, records: list[RunRecord]) -> int:
    for record, pruned in session.prune(records):
        if pruned:
            print(f"pruned {record.run_id} ({record.case} {record.config}, {record.status})")
        else:
            print(f"kept {record.run_id}: it is running", file=sys.stderr)
    if not records:
        print("nothing to prune")
    return 0


COMMAND = Subcommand("results", "tables from the results store", _arguments, cmd_results)
