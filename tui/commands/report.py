"""``fleetperf report -o FILE``: one offline HTML page of the runs (tui/results/report.py)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from tui.commands import common
from tui.commands.common import Subcommand
from tui.core.errors import UsageError
from tui.core.term import printable
from tui.results.record import utc_iso


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--case", action="append", default=[], help="this case only (repeatable)")
    p.add_argument(
        "--since",
        metavar="DATE",
        help="runs started at or after DATE (2026-11-01 or ISO time, UTC)",
    )
    p.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    p.add_argument("--results", type=Path, default=None)
    common.store_argument(p, several=True)


def cmd_report(args: argparse.Namespace) -> int:
    from tui.engine import storeops
    from tui.qualify import links as qualify_links
    from tui.results import report

    since = None
    if args.since:
        try:
            moment = datetime.fromisoformat(args.since)
        except ValueError:
            raise UsageError(
                f"--since {args.since!r}: expected a date (2026-11-01) or an ISO time"
            ) from None
        since = utc_iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    if len(common.stores(args)) > 1:  # history bands over all of them
        merged = common.read_stores(args)
        records, where = merged.records, merged.where
        qualification: list[dict] = []  # the newest qualification of one store only
    else:
        session = common.session(args)
        try:
            session.open_store(create=False)
            records = session.runs()
            where = session.store.where
            qualification = storeops.latest_qualification(session)
        finally:
            session.close()
    unknown = [c for c in args.case if c not in {r.case for r in records}]
    if unknown:
        raise UsageError(f"--case {unknown[0]!r}: no runs of it in {where}")
    if args.case:
        records = [r for r in records if r.case in args.case]
    links = qualify_links.judged(qualification, records)  # as fleetperf qualify judged them
    with common.writing(args.output):
        page = report.render(
            records, common.results_dir(args), since, qualification=qualification, links=links
        )
        report.write_report(args.output, page)
    print(printable(f"wrote {args.output} ({len(records)} run(s))"))
    return 0


COMMAND = Subcommand(
    "report",
    "one offline HTML page: tables, throughput, history bands, loss curve",
    _arguments,
    cmd_report,
)
