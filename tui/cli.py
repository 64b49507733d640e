"""Command line: the terminal app by default, ``--batch`` headless, and the subcommands.

One parser: the app's and the batch's options, then ``SUBCOMMANDS``, a table of each
subcommand's name, help line, arguments and the function it runs. The work is done in the
engine (tui/engine/session.py) and in the modules each names; here are the arguments and
what is printed."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from tui.catalog import catalog, suites
from tui.core import paths
from tui.core.errors import CatalogError, InventoryError, UsageError, UserInputError
from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir
from tui.core.term import printable
from tui.engine.session import Session, check_run_id
from tui.localfleet import fleet as localfleet
from tui.results.interrupted import interrupted_line
from tui.results.record import STATUSES, RunRecord, utc_iso
from tui.results.tables import (
    FORMATS,
    config_env_text,
    hp_text,
    monitoring_text,
    peak_text,
    render,
)

if TYPE_CHECKING:
    from tui.results.transfer import Merged

STORE_HELP = (
    "the results store: a SQLite file, sqlite:///PATH or postgresql://USER@HOST/DB"
    " (default: FLEETPERF_STORE, else ~/.config/fleetperf/store's line, else"
    " RESULTS/fleetperf.sqlite; docs/store.md)"
)
MAX_DAYS = 36525  # --older-than: a century; past it, no run is that old
# Options of the app and of --batch that a subcommand taking them also takes before its
# name (`fleetperf --results DIR results`): flags, dest, metavar, help.
GLOBAL_OPTIONS = (
    (("-i", "--inventory"), "inventory", "INVENTORY", "Ansible inventory"),
    (("--results",), "results", "DIR", "results directory"),
    (("--store",), "store", "URL", STORE_HELP),
    (("--data-root",), "data_root", "DIR", "data root for local hosts"),
)
# Where the store is named by a URL, not a path: no Path().
_NOT_A_PATH = ("store",)
# Options of a headless run that the app does not take (option -> argparse dest).
BATCH_ONLY = {
    "--case": "cases",
    "--config": "config",
    "--suite": "suite",
    "--set": "set",
    "--repeat": "repeat",
    "--format": "table_format",
    "--wait": "wait",
    "--no-judge": "no_judge",
    "--smoke": "smoke",
}


def parser() -> argparse.ArgumentParser:
    """The whole command line: the app's and --batch's options, and every subcommand."""
    p = argparse.ArgumentParser(
        prog="fleetperf",
        description="Benchmark AI accelerators: launch cases on a fleet, watch them, keep"
        " results. Without a subcommand or --batch: the terminal app on the inventory given"
        " (-i).",
    )
    p.add_argument("--batch", action="store_true", help="run headless (no terminal app)")
    p.add_argument(
        "--case",
        dest="cases",
        metavar="CASE",
        action="append",
        default=[],
        help="case to run (repeatable)",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        help="VENDOR/CHIPxNNODESxNPROC (repeatable); with --suite: VENDOR or VENDOR/CHIP",
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a hyperparameter"
    )
    p.add_argument(
        "--suite",
        metavar="NAME",
        help="run suites/NAME.yaml's cases x configs; --config VENDOR[/CHIP] then picks its"
        " runs on that chip (`fleetperf cases` lists suites)",
    )
    p.add_argument("--repeat", type=int, default=1, help="run each case N times")
    for flags, dest, metavar, text in GLOBAL_OPTIONS:
        kind = str if dest in _NOT_A_PATH else Path
        p.add_argument(*flags, dest=f"before_{dest}", metavar=metavar, type=kind, help=text)
    p.add_argument(
        "--format", dest="table_format", choices=FORMATS, default="md", help="final table format"
    )
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for hosts another controller holds (default: refuse at once)",
    )
    p.add_argument(
        "--no-judge",
        action="store_true",
        help="no verdicts against references and history, so no exit 3 (docs/references.md)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="each case's short run (about a minute on CPU; `fleetperf cases`): checks the"
        " whole pipeline, no target, not judged",
    )
    p.add_argument("--version", action="version", version=f"fleetperf {version()}")
    sub = p.add_subparsers(title="subcommands", dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.arguments(
            sub.add_parser(command.name, help=command.help, description=command.description)
        )
    return p


def version() -> str:
    try:
        return metadata.version("fleetperf")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _results_dir(args: argparse.Namespace) -> Path:
    return (args.results or default_results_dir()).resolve()


def _data_root(args: argparse.Namespace) -> Path:
    return (args.data_root or default_data_root()).resolve()


def _stores(args: argparse.Namespace) -> list[str]:
    """The stores named: a subcommand's --store (several where it takes them; one given
    before its name is among them), else --batch's or the app's, else the default
    (tui/core/paths.py default_store)."""
    given = getattr(args, "stores", None) or ([args.store] if args.store else [])
    return given or [paths.default_store(_results_dir(args))]


def _store(args: argparse.Namespace) -> str:
    """The one store named, for a command that takes one."""
    stores = _stores(args)
    if len(stores) > 1:
        raise UsageError(f"--store given {len(stores)} times: this command takes one")
    return stores[0]


def _session(args: argparse.Namespace) -> Session:
    """The engine on the results directory, data root and store given (no inventory)."""
    inventory = getattr(args, "inventory", None) or DEFAULT_INVENTORY  # cleanup's -i
    return Session(inventory.resolve(), _results_dir(args), _data_root(args), store=_store(args))


# -- the subcommands' arguments ------------------------------------------------------------


def _no_arguments(_: argparse.ArgumentParser) -> None:
    pass


def _prepare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("case")
    p.add_argument("--synthetic", action="store_true", help="tiny offline data and model")
    p.add_argument("--from", dest="src", type=Path, help="check and stage a real data dir")
    p.add_argument("--data-root", type=Path, default=None)


def _store_argument(p: argparse.ArgumentParser, several: bool = False) -> None:
    more = "; repeat it to read several stores as one" if several else ""
    p.add_argument("--store", dest="stores", metavar="URL", action="append", help=STORE_HELP + more)


def _results_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?")
    p.add_argument("--case", default=None)
    p.add_argument("--format", choices=FORMATS, default="md")
    p.add_argument("--results", type=Path, default=None)
    _store_argument(p, several=True)
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


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--case", action="append", default=[], help="this case only (repeatable)")
    p.add_argument(
        "--since",
        metavar="DATE",
        help="runs started at or after DATE (2026-11-01 or ISO time, UTC)",
    )
    p.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    p.add_argument("--results", type=Path, default=None)
    _store_argument(p, several=True)


def _cleanup_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--inventory", type=Path, default=None, help="the hosts' inventory (never a record's)"
    )
    p.add_argument("--results", type=Path, default=None)
    p.add_argument("--data-root", type=Path, default=None)
    _store_argument(p)


def _store_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    export = sub.add_parser("export", help="every run as JSON lines (to stdout, or -o FILE)")
    export.add_argument("-o", "--output", type=Path, default=None, help="the file to write")
    load = sub.add_parser("import", help="the runs of an export that the store lacks")
    load.add_argument("file", type=Path)
    for q in (export, load):
        q.add_argument("--results", type=Path, default=None)
        _store_argument(q)


def _new_case_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")


def _peak_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", type=Path, default=None)


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument(
        "--allow-write",
        action="store_true",
        help="let the page provision hosts (root on them) and export to any path;"
        " without it the page cannot provision, and exports go to RESULTS/exports",
    )
    # The served app's. --store only to refuse it (cmd_serve) in one line that does not
    # repeat the URL, as argparse's "unrecognized arguments" would, password and all.
    p.add_argument("-i", "--inventory", type=Path, default=None, help="Ansible inventory")
    p.add_argument("--results", type=Path, default=None, help="results directory")
    p.add_argument("--data-root", type=Path, default=None, help="data root for local hosts")
    p.add_argument("--store", dest="stores", action="append", help=argparse.SUPPRESS)


def _fleet_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="bring up N hosts and write an inventory for them")
    up.add_argument("count", type=int, metavar="N")
    up.add_argument(
        "--slurm", action="store_true", help="and a Slurm cluster: a login host, N nodes"
    )
    down = sub.add_parser("down", help="stop the hosts and remove what up made")
    # Test tools (docs/testing.md): a host made slow on purpose, for qualify to name.
    degrade = sub.add_parser("degrade", help="test tool: a CPU quota, a link rate on a host")
    degrade.add_argument("--cpu", metavar="FRACTION", help="its share of this machine's CPUs")
    degrade.add_argument("--link-rate", metavar="RATE", help="as tc writes it: 100mbit, 1gbit")
    restore = sub.add_parser("restore", help="test tool: remove what degrade set on a host")
    where = localfleet.DEFAULT_DIR
    for q in (degrade, restore):
        q.add_argument("host", metavar="HOST")
    for q in (up, down, degrade, restore):
        q.add_argument("--dir", type=Path, default=where, help=f"default {where}")


def _provision_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--inventory", type=Path, default=None, help=f"default {DEFAULT_INVENTORY}"
    )
    p.add_argument("--limit", metavar="HOST[,HOST]", help="these hosts only")
    p.add_argument(
        "--check", action="store_true", help="check mode: what would change, changing nothing"
    )


def _qualify_arguments(p: argparse.ArgumentParser) -> None:
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
    """tui/qualify/run.py: the base suite over a group, judged host against host."""
    from tui.qualify.run import QualifyArgs, run_qualify, show_history

    if args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget {args.budget}: must be at least 1 second")
    qargs = QualifyArgs(
        inventory=(args.inventory or DEFAULT_INVENTORY).resolve(),
        results_dir=_results_dir(args),
        data_root=_data_root(args),
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
        return show_history(qargs, args.history)
    return run_qualify(qargs)


def _images_arguments(p: argparse.ArgumentParser) -> None:
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


# -- the subcommands ---------------------------------------------------------------------


def cmd_cases() -> int:
    for name in catalog.case_names():
        case = catalog.load_case(name)
        print(f"{name}  ({case.model}, {case.dataset}, {case.kind})")
        print(f"    {smoke_text(case)}")
        for ref in catalog.config_refs(case):
            print(f"    {ref}")
    print("\nsuites (--batch --suite NAME, --config VENDOR[/CHIP] picks a chip; docs/suites.md)")
    for name in suites.suite_names():
        try:
            suite = suites.load_suite(name)
        except CatalogError as exc:  # e.g. FLEETPERF_CASES_DIR names other cases: still list
            print(f"{name}  (not runnable here: {exc})")
            continue
        print(f"{name}  ({suite.description})" if suite.description else name)
        print(f"    {len(suite.pairs)} run(s) on {', '.join(suite.chips)}")
    return 0


def smoke_text(case: catalog.CaseFile) -> str:
    """How long the case's --smoke and full runs took here, as its case.yaml records."""
    if case.smoke is None:
        return "no --smoke run declared"
    took = case.smoke.measured
    if took is None:
        return "--smoke: not timed yet"
    return (
        f"--smoke {_duration(took.smoke_s)}, full run {_duration(took.full_s)} on {took.config}"
        f" (measured on a {took.cores}-CPU host at a load up to {took.load:g})"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def cmd_prepare(case_name: str, synthetic: bool, data_root: Path, src: Path | None) -> int:
    case = catalog.load_case(case_name)
    if not case.prepare:  # a case that reads no data set (the base cases): done already
        print(f"fleetperf prepare: case {case.name}: nothing to stage (it reads no data)")
        return 0
    argv = [sys.executable, str(case.dir / case.prepare), "--out", str(data_root / case.name)]
    if synthetic:
        argv.append("--synthetic")
    if src is not None:
        argv += ["--from", str(src.resolve())]
    env = {**os.environ, "PYTHONPATH": str(paths.HARNESS_DIR)}
    # prepare.py (harness.prepare_main) writes the data manifest the record reads.
    return subprocess.run(argv, env=env, check=False).returncode


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
    if len(_stores(args)) > 1:
        if args.prune:
            raise UsageError("--prune: one store at a time (--store given more than once)")
        merged = _read_stores(args)
        if args.run_id:
            records, hidden = [merged.find(args.run_id)], 0
        else:
            records, hidden = _select(
                args, [r for r in merged.records if args.case in (None, r.case)]
            )
    else:
        session = _session(args)
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


def _read_stores(args: argparse.Namespace) -> Merged:
    """The runs of the stores named (--store more than once), read as one; a run id found
    in two of them said on stderr."""
    from tui.results import transfer

    merged = transfer.read_stores(_stores(args))
    for note in merged.notes:
        print(printable(f"fleetperf: {note}"), file=sys.stderr)
    return merged


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


def cmd_report(args: argparse.Namespace) -> int:
    from tui.qualify import links as qualify_links
    from tui.results import qualifications, report

    since = None
    if args.since:
        try:
            moment = datetime.fromisoformat(args.since)
        except ValueError:
            raise UsageError(
                f"--since {args.since!r}: expected a date (2026-11-01) or an ISO time"
            ) from None
        since = utc_iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    if len(_stores(args)) > 1:  # history bands over all of them
        merged = _read_stores(args)
        records, where = merged.records, merged.where
        qualification: list[dict] = []  # the newest qualification of one store only
    else:
        session = _session(args)
        try:
            session.open_store(create=False)
            records = session.runs()
            where = session.store.where
            qualification = qualifications.latest(session.store_at)
        finally:
            session.close()
    unknown = [c for c in args.case if c not in {r.case for r in records}]
    if unknown:
        raise UsageError(f"--case {unknown[0]!r}: no runs of it in {where}")
    if args.case:
        records = [r for r in records if r.case in args.case]
    links = qualify_links.judged(qualification, records)  # as fleetperf qualify judged them
    try:
        page = report.render(
            records, _results_dir(args), since, qualification=qualification, links=links
        )
        report.write_report(args.output, page)
    except OSError as exc:
        raise UsageError(f"-o {args.output}: {exc.strerror}") from None
    print(printable(f"wrote {args.output} ({len(records)} run(s))"))
    return 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    """playbooks/stop.yml for every interrupted run of this machine not cleaned yet, on the
    hosts of -i (the default inventory without it); another machine's runs are listed."""
    code, cleaned = 0, 0
    session = _session(args)
    try:
        for done in session.cleanup():  # tui/engine/session.py Cleaned
            cleaned += 1
            failed = done.outcome == "failed"
            code = 1 if failed else code
            print(printable(done.line()), file=sys.stderr if failed else sys.stdout)
    finally:
        session.close()
    if not cleaned:
        print("no interrupted runs to clean up")
    return code


def cmd_store(args: argparse.Namespace) -> int:
    """``store export``: every run as JSON lines; ``store import FILE``: the runs the store
    lacks (tui/results/transfer.py)."""
    from tui.results import transfer
    from tui.results.store import ResultStore

    if args.action == "import":
        records = transfer.read_export(args.file)  # every line checked before any is stored
        with ResultStore(_store(args)) as store:  # made where there is none
            done = transfer.import_records(store, records)
            where = store.where
        print(
            printable(
                f"imported {done.added} run(s) into {where}; {done.identical} already there"
                f" (identical), {len(done.different)} already there with another record"
            )
        )
        for run_id in done.different:
            print(printable(f"fleetperf: run {run_id}: kept {where}'s record"), file=sys.stderr)
        return 1 if done.different else 0
    with transfer.open_existing(_store(args)) as store:
        if args.output is None:
            transfer.export(store, sys.stdout)
            return 0
        try:
            count = transfer.export_file(store, args.output)
        except OSError as exc:
            raise UsageError(f"-o {args.output}: {exc.strerror}") from None
    print(printable(f"wrote {args.output} ({count} run(s) from {store.where})"))
    return 0


def cmd_peak(args: argparse.Namespace) -> int:
    """Print the measured peaks cached under the data root (harness.peak_cache, no torch)."""
    from harness import peak_cache

    path = peak_cache.cache_path(args.data_root or default_data_root())
    try:
        entries = peak_cache.read_entries(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not entries:
        print(f"no measured peaks in {path} (a run measures them)")
        return 0
    print(f"{path}:\n{peak_cache.format_entries(entries)}")
    return 0


def cmd_new_case(args: argparse.Namespace) -> int:
    from tui.catalog.newcase import new_case

    print(f"wrote {new_case(args.name)} (next: docs/new-case.md)")
    return 0


def cmd_fleet(args: argparse.Namespace) -> int:
    """Local SSH hosts (tui/localfleet/): ``up N [--slurm]``, ``down``; the test
    tools ``degrade HOST [--cpu FRACTION] [--link-rate RATE]``, ``restore HOST``."""
    if args.action in ("degrade", "restore"):
        cpu, rate = getattr(args, "cpu", None), getattr(args, "link_rate", None)  # degrade's
        return localfleet.degrade_main(args.action, args.dir.resolve(), args.host, cpu, rate)
    count, slurm = getattr(args, "count", 0), getattr(args, "slurm", False)  # up's only
    return localfleet.main(args.action, args.dir.resolve(), count, slurm)


def cmd_provision(args: argparse.Namespace) -> int:
    """provision.yml on the vendor groups' hosts (tui/engine/provision.py), told per host and
    role; 1 when a host failed or was unreachable."""
    from tui.engine import provision

    inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
    session = Session(inventory, default_results_dir(), default_data_root())
    try:
        hosts = provision.pick_hosts(session.read_inventory(), args.limit)
        mode = "check mode: nothing is changed" if args.check else "changes the hosts"
        print(
            printable(
                f"provision.yml on {', '.join(hosts)} of {inventory} ({mode}); this takes minutes"
            ),
            flush=True,
        )
        outcomes: dict[str, provision.Outcome] = {}
        stats = session.provision(hosts, args.check, lambda ev: provision.collect(outcomes, ev))
    except UserInputError as exc:
        print(printable(f"fleetperf provision: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # ansible, in our process group, got the SIGINT too
        print("fleetperf provision: interrupted; run it again to finish", file=sys.stderr)
        return 130
    failed = provision.settle(hosts, outcomes, stats)
    print(printable("\n".join(provision.summary(hosts, outcomes, args.check))))
    if failed:
        print(printable(f"fleetperf provision: failed on {', '.join(failed)}"), file=sys.stderr)
        return 1
    return 0


def _build_args(pairs: list[str]) -> dict[str, str]:
    bad = [a for a in pairs if "=" not in a]
    if bad:
        raise ValueError(f"--build-arg {bad[0]}: expected KEY=VALUE")
    return dict(a.split("=", 1) for a in pairs)


def cmd_images(args: argparse.Namespace) -> int:
    """Benchmark images (tui/catalog/images.py): the tag, the build context, a build."""
    from tui.catalog import images

    try:
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


def _app(name: str, *args: object) -> int:
    """The terminal app (tui/app/, textual), imported only when asked for."""
    try:
        import tui.app as app
    except ModuleNotFoundError as exc:
        if exc.name not in ("tui.app", "textual"):
            raise
        print(
            "fleetperf: the terminal app is not available; run headless with"
            " --batch --case CASE --config VENDOR/CHIPxNxP",
            file=sys.stderr,
        )
        return 2
    return int(getattr(app, name)(*args) or 0)


def cmd_serve(args: argparse.Namespace) -> int:
    """The app in a browser, on the inventory, results and data root given (each tab's app
    gets them; the store comes from the environment, never argv)."""
    if args.stores:
        raise UsageError(
            "serve takes no --store: a URL on the command line shows in `ps` to every user;"
            " set FLEETPERF_STORE or ~/.config/fleetperf/store (docs/store.md)"
        )
    inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
    if not inventory.is_file():  # refused here, not in every tab's Hosts screen
        raise InventoryError(f"inventory {inventory}: no such file")
    where = (inventory, _results_dir(args), _data_root(args))
    return _app("serve", args.host, args.port, args.allow_write, *where)


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str  # its line in ``fleetperf --help``
    arguments: Callable[[argparse.ArgumentParser], None]  # adds its arguments
    run: Callable[[argparse.Namespace], int]  # its exit status
    description: str | None = None  # ``fleetperf NAME --help``'s, where more than the help


SUBCOMMANDS = (
    Subcommand(
        "cases", "list cases and their configs, and suites", _no_arguments, lambda _: cmd_cases()
    ),
    Subcommand(
        "prepare",
        "stage a case's data and checkpoint",
        _prepare_arguments,
        lambda a: cmd_prepare(a.case, a.synthetic, a.data_root or default_data_root(), a.src),
    ),
    Subcommand("results", "tables from the results store", _results_arguments, cmd_results),
    Subcommand(
        "report",
        "one offline HTML page: tables, throughput, history bands, loss curve",
        _report_arguments,
        cmd_report,
    ),
    Subcommand(
        "store",
        "move runs between stores: export (JSON lines), import",
        _store_arguments,
        cmd_store,
        "export: every run of the store as JSON lines, a header first (docs/store.md);"
        " import FILE: the runs of an export the store lacks (a run id it has is skipped,"
        " its record kept).",
    ),
    Subcommand(
        "cleanup",
        "stop what interrupted runs left on their hosts, and mark them",
        _cleanup_arguments,
        cmd_cleanup,
    ),
    Subcommand(
        "new-case",
        "write cases/NAME/ from a template (docs/new-case.md)",
        _new_case_arguments,
        cmd_new_case,
    ),
    Subcommand(
        "peak", "the measured-peak cache (matmul rate, bandwidth)", _peak_arguments, cmd_peak
    ),
    Subcommand(
        "serve",
        "the app in a browser, for you only",
        _serve_arguments,
        cmd_serve,
        "Serve the app over HTTP (textual-serve). It prints a URL with a token made for this"
        " start: only a page opened from that URL gets the app. The store: FLEETPERF_STORE or"
        " ~/.config/fleetperf/store, else RESULTS/fleetperf.sqlite (docs/store.md).",
    ),
    Subcommand(
        "fleet",
        "SSH hosts on this machine to try fleetperf on (as root): up N, down; degrade, restore",
        _fleet_arguments,
        cmd_fleet,
    ),
    Subcommand(
        "provision",
        "provision.yml on the inventory's hosts, told per host and role (--check: a preview)",
        _provision_arguments,
        cmd_provision,
        "Run provision.yml on the hosts of the inventory's vendor groups and say what"
        " changed per host and role; with --check, what would change (nothing is).",
    ),
    Subcommand(
        "qualify",
        "the base suite over a group's hosts, each judged against its peers (exit 3: flagged)",
        _qualify_arguments,
        cmd_qualify,
        "Run the base suite's single-host cases on every host of a group, the links between"
        " them pair by pair and one all-host all_reduce; judge each host against its peers"
        " and name the ones outside their band (docs/qualify.md).",
    ),
    Subcommand(
        "images",
        "benchmark images: the expected tag, the build context, a build",
        _images_arguments,
        cmd_images,
    ),
)


def _leaf(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand given: ``store import``'s, ``results``'s, or ``p``.
    (argparse lists a parser's actions and options only in these underscored attributes.)"""
    while True:
        nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, nested[0].dest, None) if nested else None
        if name is None:
            return p
        p = nested[0].choices[name]


def _global_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The global options given before a subcommand, handed to it as if given after its
    name; refused (one line) where it does not take one, or takes another value after it.
    Without a subcommand they are the app's and --batch's own."""
    command = args.command
    leaf = _leaf(p, args) if command else None
    for flags, dest, _, _ in GLOBAL_OPTIONS:
        before = getattr(args, f"before_{dest}")
        if leaf is None:
            setattr(args, dest, before)
            continue
        if not hasattr(args, dest):  # a subcommand without it: the helpers read None
            setattr(args, dest, None)
        if before is None:
            continue
        action = next(
            (leaf._option_string_actions[f] for f in flags if f in leaf._option_string_actions),
            None,
        )
        if action is None:
            p.error(
                f"{flags[-1]} before {command}: fleetperf {command} takes no {flags[-1]}"
                f" (fleetperf {command} --help)"
            )
        after = getattr(args, action.dest, None)
        if after and after not in (before, [before]):
            p.error(f"{flags[-1]} given before and after {command}, two values: give it once")
        several = isinstance(action, argparse._AppendAction)
        setattr(args, action.dest, [before] if several else before)
    if not command:
        return
    if args.batch:
        p.error(f"--batch runs cases; it takes no subcommand ({command})")
    for option, dest in BATCH_ONLY.items():
        if getattr(args, dest) != p.get_default(dest):
            p.error(
                f"{option} before {command}: a --batch option (fleetperf {command} --help"
                " lists its own, given after its name)"
            )


def parse_args(argv: list[str]) -> argparse.Namespace:
    """A command line as main reads it: a subcommand, ``--batch`` and its options, or the
    app with -i, --results, --data-root and --store only. argparse's exit 2 with one line
    for what it refuses; a global option before a subcommand is the subcommand's, or
    refused: never ignored (issue 41)."""
    p = parser()
    args = p.parse_args(argv)
    _global_options(p, args)
    if args.command is None and not args.batch:
        given = [
            option
            for option, dest in BATCH_ONLY.items()
            if getattr(args, dest) != p.get_default(dest)
        ]
        if given:
            p.error(
                f"{given[0]} needs --batch (the app picks cases, configs and overrides"
                " on its Cases screen; it takes -i, --results, --data-root and --store)"
            )
    return args


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the process's own command line: a batch may end the process
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        if args.command is not None:
            return next(c for c in SUBCOMMANDS if c.name == args.command).run(args)
        if not args.batch:  # the app, on the inventory, results and data root given
            inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
            if not inventory.is_file():  # refused here, not on the Hosts screen
                raise InventoryError(f"inventory {inventory}: no such file")
            results, data_root = _results_dir(args), _data_root(args)
            return _app("main", False, inventory, results, data_root, args.store)
        from tui.batch import BatchArgs, end_process, run_batch

        rc = run_batch(
            BatchArgs(
                cases=args.cases,
                configs=args.config,
                sets=args.set,
                inventory=(args.inventory or DEFAULT_INVENTORY).resolve(),
                repeat=args.repeat,
                results_dir=_results_dir(args),
                data_root=_data_root(args),
                fmt=args.table_format,
                wait_s=args.wait,
                judge=not args.no_judge,
                smoke=args.smoke,
                suite=args.suite,
                store=args.store,
            )
        )
        return end_process(rc) if program else rc
    except UserInputError as exc:
        print(printable(f"fleetperf: error: {exc}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`fleetperf cases | head`): stop as a shell tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # 128 + SIGPIPE, as the shell reports a tool the pipe ended


if __name__ == "__main__":
    sys.exit(main())
