"""``fleetperf qualify``: the base suite over a group's hosts, each judged against its peers
(tui/qualify/: plan, run, judge, keep), and ``--history HOST``; what it prints. The
qualification's modules load when it runs: the store's libraries come with them."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tui.commands import common
from tui.commands.common import STORE_HELP, Subcommand
from tui.core.errors import UsageError, UserInputError
from tui.core.paths import DEFAULT_INVENTORY
from tui.core.term import printable
from tui.results.tables import FORMATS

if TYPE_CHECKING:
    from tui.qualify.run import QualifyArgs


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--inventory", type=Path, default=None, help=f"default {DEFAULT_INVENTORY}"
    )
    p.add_argument("--group", metavar="VENDOR", help="the inventory group (default: its only one)")
    p.add_argument("--limit", metavar="HOST[,HOST]", help="these hosts of the group only")
    p.add_argument(
        "--repeat",
        dest="qualify_repeat",
        type=int,
        default=3,
        help="samples of each run per host (default 3)",
    )
    p.add_argument("--one-at-a-time", action="store_true", help="one host (or pair) at a time")
    p.add_argument(
        "--case",
        dest="qualify_cases",
        action="append",
        default=[],
        metavar="CASE[/CONFIG]",
        help="the suites' rows of this case (or config) only",
    )
    p.add_argument(
        "--set",
        dest="qualify_sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="to the cases that take KEY",
    )
    p.add_argument(
        "--budget", type=int, default=None, metavar="SECONDS", help="each run's time limit"
    )
    p.add_argument(
        "--wait",
        dest="qualify_wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="for a host another holds",
    )
    p.add_argument("--format", dest="qualify_format", choices=FORMATS, default="md")
    p.add_argument(
        "--history", metavar="HOST", help="the host's qualifications against its own past"
    )
    p.add_argument("--results", type=Path, default=None)
    p.add_argument("--store", metavar="URL", help=STORE_HELP)
    p.add_argument("--data-root", type=Path, default=None)


def cmd_qualify(args: argparse.Namespace) -> int:
    """0 nothing flagged, 3 something flagged, 2 bad input, 1 stopped or a run refused
    mid-way."""
    from tui.qualify.run import QualifyArgs

    if args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget {args.budget}: must be at least 1 second")
    qargs = QualifyArgs(
        inventory=(args.inventory or DEFAULT_INVENTORY).resolve(),
        results_dir=common.results_dir(args),
        data_root=common.data_root(args),
        store=args.store,
        group=args.group,
        limit=args.limit,
        repeat=args.qualify_repeat,
        one_at_a_time=args.one_at_a_time,
        fmt=args.qualify_format,
        sets=args.qualify_sets,
        cases=args.qualify_cases,
        budget_s=args.budget,
        wait_s=args.qualify_wait,
    )
    if args.history:
        return _history(qargs, args.history)
    return _qualify(qargs)


def _error(text: str) -> int:
    """The one line of bad input; exit 2 (tui/batch.py's EXIT_BAD_INPUT)."""
    from tui.batch import EXIT_BAD_INPUT

    print(printable(f"fleetperf qualify: error: {text}"), file=sys.stderr)
    return EXIT_BAD_INPUT


def _qualify(args: QualifyArgs) -> int:
    """Plan, run, judge and keep one qualification; the progress on stdout (stderr with
    --format json or csv: stdout holds the table alone), the table, the flags."""
    from tui.batch import EXIT_FAILED, EXIT_FLAGGED, EXIT_OK, signals_set
    from tui.engine.session import Session
    from tui.qualify import keep, output
    from tui.qualify.run import Qualification, boot_ids, pick_hosts, shared_machines
    from tui.results.record import now_utc_iso

    out = sys.stdout
    progress = out if args.fmt == "md" else sys.stderr
    started = now_utc_iso()
    try:
        if args.repeat < 1:
            raise UsageError(f"--repeat {args.repeat}: must be at least 1")
        session = Session(
            args.inventory,
            args.results_dir,
            args.data_root,
            lease_wait_s=args.wait_s,
            judge=False,
            store=args.store,
        )
    except UserInputError as exc:
        return _error(str(exc))
    try:
        try:
            session.open_store()
            group, hosts = pick_hosts(session.host_groups(), args.group, args.limit)
            qual = Qualification(args, session, group, hosts, progress)
            shared = shared_machines(boot_ids(session, hosts))
        except UserInputError as exc:
            return _error(str(exc))
        one_at_a_time = args.one_at_a_time or bool(shared)
        for machine in shared:
            print(
                printable(
                    f"== hosts {', '.join(machine)} share one machine (one boot id): one at a time"
                ),
                file=progress,
            )
        print(
            printable(
                f"== qualify group {group}: {len(hosts)} hosts; {len(qual.host_specs)} runs"
                f" each x {args.repeat}, {len(qual.link_specs)} per pair x {args.repeat}"
            ),
            file=progress,
            flush=True,
        )
        begun = time.monotonic()
        with signals_set(qual.requested):
            measured = qual.run(one_at_a_time)
        if measured.refused:
            return _error(measured.refused)
        if measured.stopped:
            print("fleetperf qualify: stopped; nothing judged", file=sys.stderr)
            return EXIT_FAILED
        result = qual.judged()
        keep.save(session.store_at, started, result)
    finally:
        session.close()
    print(printable(f"== {time.monotonic() - begun:.0f} s\n"), file=progress)
    print(printable(output.render(result, args.fmt)), file=out)
    flags = output.flag_lines(result)
    for line in flags:
        print(printable(line), file=progress)
    return EXIT_FLAGGED if flags else EXIT_OK


def _history(args: QualifyArgs, host: str) -> int:
    """``--history HOST``: the host's verdicts of every qualification, oldest first, and
    its latest medians against its own past."""
    from tui.batch import EXIT_OK
    from tui.engine import storeops
    from tui.engine.session import Session
    from tui.qualify import output

    session = Session(args.inventory, args.results_dir, args.data_root, store=args.store)
    try:
        rows = storeops.qualification_history(session, host)
    except UserInputError as exc:
        return _error(str(exc))
    if not rows:
        return _error(f"no qualification of host {host} in the store")
    print(printable(output.history_text(host, rows, args.fmt)), file=sys.stdout)
    return EXIT_OK


COMMAND = Subcommand(
    "qualify",
    "the base suite over a group's hosts, each judged against its peers (exit 3: flagged)",
    _arguments,
    cmd_qualify,
    "Run the base suite's single-host cases on every host of a group, the links between"
    " them pair by pair and one all-host all_reduce; judge each host against its peers"
    " and name the ones outside their band (docs/qualify.md).",
)
