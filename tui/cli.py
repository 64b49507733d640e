"""Command line: the terminal app by default, ``--batch`` headless, and the subcommands."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

from tui.catalog import catalog
from tui.core import paths
from tui.core.errors import CatalogError, InventoryError, UsageError, UserInputError
from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir, store_path
from tui.core.term import printable
from tui.results.record import RUN_ID, STATUSES, RunRecord, utc_iso
from tui.results.store import ResultStore, interrupted_line, mark_interrupted
from tui.results.tables import FORMATS, config_env_text, peak_text, render

MAX_DAYS = 36525  # --older-than: a century; past it, no run is that old
# Options of a headless run that the app does not take (option -> argparse dest).
BATCH_ONLY = {
    "--case": "case",
    "--config": "config",
    "--set": "set",
    "--repeat": "repeat",
    "--format": "format",
    "--wait": "wait",
    "--no-judge": "no_judge",
    "--smoke": "smoke",
}
SUBCOMMANDS = ("cases", "prepare", "results", "report", "cleanup", "peak", "serve", "new-case")


def _main_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fleetperf",
        description="Benchmark AI accelerators: launch cases on a fleet, watch them, keep"
        " results. Without --batch: the terminal app on the inventory given (-i).",
        epilog="subcommands: fleetperf cases | prepare CASE [--synthetic] | results [RUN_ID]",
    )
    p.add_argument("--batch", action="store_true", help="run headless (no terminal app)")
    p.add_argument("--case", action="append", default=[], help="case to run (repeatable)")
    p.add_argument(
        "--config", action="append", default=[], help="VENDOR/CHIPxNNODESxNPROC (repeatable)"
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a hyperparameter"
    )
    p.add_argument("-i", "--inventory", type=Path, default=None, help="Ansible inventory")
    p.add_argument("--repeat", type=int, default=1, help="run each case N times")
    p.add_argument("--results", type=Path, default=None, help="results directory")
    p.add_argument("--data-root", type=Path, default=None, help="data root for local hosts")
    p.add_argument("--format", choices=FORMATS, default="md", help="final table format")
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
    return p


def version() -> str:
    try:
        return metadata.version("fleetperf")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _sub_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleetperf")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("cases", help="list cases and their configs")
    prep = sub.add_parser("prepare", help="stage a case's data and checkpoint")
    prep.add_argument("case")
    prep.add_argument("--synthetic", action="store_true", help="tiny offline data and model")
    prep.add_argument("--from", dest="src", type=Path, help="check and stage a real data dir")
    prep.add_argument("--data-root", type=Path, default=None)
    res = sub.add_parser("results", help="tables from the results store")
    res.add_argument("run_id", nargs="?")
    res.add_argument("--case", default=None)
    res.add_argument("--format", choices=FORMATS, default="md")
    res.add_argument("--results", type=Path, default=None)
    res.add_argument(
        "--status",
        choices=("all", *STATUSES),
        default=None,
        help="runs with this status only (default: passed; all: every run)",
    )
    res.add_argument(
        "--prune",
        action="store_true",
        help="remove the selected runs (by run id, --status or --older-than) from the store,"
        " with their run directories",
    )
    res.add_argument(
        "--older-than", metavar="DAYS", help=f"runs started DAYS ago or before (0 to {MAX_DAYS})"
    )
    rep = sub.add_parser(
        "report", help="one offline HTML page: tables, throughput, history bands, loss curve"
    )
    rep.add_argument("--case", action="append", default=[], help="this case only (repeatable)")
    rep.add_argument(
        "--since",
        metavar="DATE",
        help="runs started at or after DATE (2026-11-01 or ISO time, UTC)",
    )
    rep.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    rep.add_argument("--results", type=Path, default=None)
    clean = sub.add_parser(
        "cleanup", help="stop what interrupted runs left on their hosts, and mark them"
    )
    clean.add_argument("--results", type=Path, default=None)
    clean.add_argument("--data-root", type=Path, default=None)
    new = sub.add_parser("new-case", help="write cases/NAME/ from a template (docs/new-case.md)")
    new.add_argument("name")
    peak = sub.add_parser("peak", help="the measured-peak cache (matmul rate, bandwidth)")
    peak.add_argument("--data-root", type=Path, default=None)
    serve = sub.add_parser(
        "serve",
        help="the app in a browser, for you only",
        description="Serve the app over HTTP (textual-serve). It prints a URL with a token"
        " made for this start: only a page opened from that URL gets the app.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument(
        "--allow-write",
        action="store_true",
        help="let the page provision hosts (root on them) and export to any path;"
        " without it the page cannot provision, and exports go to RESULTS/exports",
    )
    return p


def cmd_cases() -> int:
    for name in catalog.case_names():
        case = catalog.load_case(name)
        print(f"{name}  ({case.model}, {case.dataset}, {case.kind})")
        print(f"    {smoke_text(case)}")
        for ref in catalog.config_refs(case):
            print(f"    {ref}")
    return 0


def smoke_text(case: catalog.CaseSpec) -> str:
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
    if not case.prepare:
        raise CatalogError(f"case {case.name}: declares no prepare script")
    argv = [sys.executable, str(case.dir / case.prepare), "--out", str(data_root / case.name)]
    if synthetic:
        argv.append("--synthetic")
    if src is not None:
        argv += ["--from", str(src.resolve())]
    env = {**os.environ, "PYTHONPATH": str(paths.HARNESS_DIR)}
    # prepare.py (harness.prepare_main) writes the data manifest the record reads.
    return subprocess.run(argv, env=env, check=False).returncode


def _open_store(results_dir: Path) -> ResultStore:
    path = store_path(results_dir)
    if not path.is_file():
        raise UsageError(f"no results store at {path} (run a case first)")
    return ResultStore(path)


def _select(args: argparse.Namespace, store: ResultStore) -> tuple[list[RunRecord], int]:
    """The runs the arguments name, and how many others of the case the filters hid."""
    if args.run_id:  # the whole id, a unique prefix, or the short form tables show
        record = store.get(store.resolve(args.run_id))
        if record is None:  # pruned by another controller since
            raise UsageError(f"no run {args.run_id!r} in {store.path}")
        return [record], 0
    every = store.list(case=args.case)
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


def cmd_results(args: argparse.Namespace, results_dir: Path) -> int:
    if args.older_than is not None:  # checked before the store is opened
        args.older_than = _days(args.older_than)
    if args.prune and not (args.run_id or args.status or args.older_than is not None):
        raise UsageError("--prune: name the runs (RUN_ID, --status or --older-than)")
    if args.prune and args.run_id:
        _check_run_id(args.run_id, "--prune")
    with _open_store(results_dir) as store:
        for record in mark_interrupted(store):
            print(printable(interrupted_line(record)), file=sys.stderr)
        records, hidden = _select(args, store)
        if args.prune:
            return _prune(store, records, results_dir)
    if records or args.format != "md":  # JSON and CSV stay machine-readable when empty
        print(printable(render(records, args.format, ids=True)))
        if args.run_id and args.format == "md":  # one run: its notes, what MFU divides, env
            print("\n" + printable(notes_text(records[0])))
            print("\n" + printable(peak_text(records[0])))
            print("\n" + printable(config_env_text(records[0])))
    else:
        which = "" if args.status == "all" else f"{args.status or 'passed'} "
        print(f"no {which}runs" + (f" of case {args.case}" if args.case else "") + " in the store")
    if hidden and args.format == "md":
        print(f"({hidden} run(s) with another status hidden: --status all shows them)")
    return 0


def notes_text(record: RunRecord) -> str:
    """The workload's and the controller's notes on one run, one a line."""
    if not record.notes:
        return "notes: none"
    return "notes:\n" + "\n".join(f"  - {note}" for note in record.notes)


def cmd_report(args: argparse.Namespace, results_dir: Path) -> int:
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
    with _open_store(results_dir) as store:
        records = store.list()
    unknown = [c for c in args.case if c not in {r.case for r in records}]
    if unknown:
        raise UsageError(f"--case {unknown[0]!r}: no runs of it in {store.path}")
    if args.case:
        records = [r for r in records if r.case in args.case]
    try:
        report.write_report(args.output, report.render(records, results_dir, since))
    except OSError as exc:
        raise UsageError(f"-o {args.output}: {exc.strerror}") from None
    print(printable(f"wrote {args.output} ({len(records)} run(s))"))
    return 0


def _check_run_id(run_id: str, where: str) -> None:
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"{where}: run_id {run_id!r} is not a run id (letters, digits, . _ -)")


def _runs_dir(results_dir: Path) -> Path:
    """``<results>/runs``, made absolute without resolving links; refused if it is a link:
    a prune removes directories inside the results directory, never elsewhere."""
    runs = Path(os.path.abspath(results_dir)) / "runs"
    if runs.is_symlink():
        raise UsageError(f"{runs}: a link; --prune removes run directories only in place")
    return runs


def _prune(store: ResultStore, records: list[RunRecord], results_dir: Path) -> int:
    """A run's directory, then its row: if the directory cannot go, the row stays. The
    directory is always ``<results>/runs/<run_id>`` (never the path the record holds: a
    copied results directory's records name the original's), checked before anything goes."""
    runs = _runs_dir(results_dir)
    for record in records:
        _check_run_id(record.run_id, str(store.path))
    for record in records:
        if record.status == "running":
            print(f"kept {record.run_id}: it is running", file=sys.stderr)
            continue
        run_dir = runs / record.run_id
        if run_dir.is_symlink():  # removed as a link, never followed
            run_dir.unlink()
        elif run_dir.exists():
            shutil.rmtree(run_dir)
        store.delete(record.run_id)
        print(f"pruned {record.run_id} ({record.case} {record.config}, {record.status})")
    if not records:
        print("nothing to prune")
    return 0


def cmd_cleanup(results_dir: Path, data_root: Path) -> int:
    """playbooks/stop.yml for every interrupted run not cleaned yet, on its hosts."""
    from tui.executors import fleet

    code = 0
    with _open_store(results_dir) as store:
        mark_interrupted(store)
        todo = [r for r in store.list(status="interrupted") if not r.cleaned]
        for record in todo:
            inventory = Path(record.inventory or DEFAULT_INVENTORY)
            executor = record.executor or ""
            ok = fleet.stop_run(
                record.run_id, record.hosts, inventory, results_dir, data_root, executor
            )
            if ok:
                store.add(record.model_copy(update={"cleaned": True}))
                print(printable(f"cleaned {record.run_id}: stopped on {', '.join(record.hosts)}"))
            else:
                code = 1
                hosts = ", ".join(record.hosts)
                print(
                    printable(
                        f"fleetperf: run {record.run_id}: stop.yml failed on {hosts}"
                        f" (see {record.run_dir}/ansible-cleanup)"
                    ),
                    file=sys.stderr,
                )
        if not todo:
            print("no interrupted runs to clean up")
    return code


def cmd_peak(data_root: Path) -> int:
    """Print the measured peaks cached under ``data_root`` (harness.peak_cache, no torch)."""
    from harness import peak_cache

    path = peak_cache.cache_path(data_root)
    try:
        entries = peak_cache.read_entries(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not entries:
        print(f"no measured peaks in {path} (a run measures them)")
        return 0
    print(f"{path}:\n{peak_cache.format_entries(entries)}")
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


def parse_args(argv: list[str]) -> argparse.Namespace:
    """A command line (not ``fleet``, tui/localfleet/fleet.py's) as main reads it: a subcommand,
    ``--batch`` and its options, or the app with -i, --results and --data-root only.
    argparse's exit 2 with one line for what it refuses."""
    if argv and argv[0] in SUBCOMMANDS:
        return _sub_parser().parse_args(argv)
    parser = _main_parser()
    args = parser.parse_args(argv)
    if not args.batch:
        given = [
            option
            for option, dest in BATCH_ONLY.items()
            if getattr(args, dest) != parser.get_default(dest)
        ]
        if given:
            parser.error(
                f"{given[0]} needs --batch (the app picks cases, configs and overrides"
                " on its Cases screen; it takes -i, --results and --data-root)"
            )
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "fleet":  # local SSH hosts: fleetperf fleet up N | down
            from tui.localfleet.fleet import main as fleet_main

            return fleet_main(argv[1:])
        if argv and argv[0] == "provision":  # provision.yml, told per host and role
            from tui.engine.provision import main as provision_main

            return provision_main(argv[1:])
        if argv and argv[0] in SUBCOMMANDS:
            args = parse_args(argv)
            if args.command == "cases":
                return cmd_cases()
            if args.command == "prepare":
                data_root = args.data_root or default_data_root()
                return cmd_prepare(args.case, args.synthetic, data_root, args.src)
            if args.command == "new-case":
                from tui.catalog.newcase import new_case

                print(f"wrote {new_case(args.name)} (next: docs/new-case.md)")
                return 0
            if args.command == "peak":
                return cmd_peak(args.data_root or default_data_root())
            if args.command == "serve":
                return _app("serve", args.host, args.port, args.allow_write)
            if args.command == "report":
                return cmd_report(args, args.results or default_results_dir())
            if args.command == "cleanup":
                return cmd_cleanup(
                    (args.results or default_results_dir()).resolve(),
                    (args.data_root or default_data_root()).resolve(),
                )
            return cmd_results(args, args.results or default_results_dir())
        args = parse_args(argv)
        if not args.batch:  # the app, on the inventory, results and data root given
            inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
            if not inventory.is_file():  # refused here, not on the Hosts screen
                raise InventoryError(f"inventory {inventory}: no such file")
            return _app(
                "main",
                False,
                inventory,
                (args.results or default_results_dir()).resolve(),
                (args.data_root or default_data_root()).resolve(),
            )
        from tui.batch import BatchArgs, run_batch

        return run_batch(
            BatchArgs(
                cases=args.case,
                configs=args.config,
                sets=args.set,
                inventory=(args.inventory or DEFAULT_INVENTORY).resolve(),
                repeat=args.repeat,
                results_dir=(args.results or default_results_dir()).resolve(),
                data_root=(args.data_root or default_data_root()).resolve(),
                fmt=args.format,
                wait_s=args.wait,
                judge=not args.no_judge,
                smoke=args.smoke,
            )
        )
    except UserInputError as exc:
        print(printable(f"fleetperf: error: {exc}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`fleetperf cases | head`): stop as a shell tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # 128 + SIGPIPE, as the shell reports a tool the pipe ended


if __name__ == "__main__":
    sys.exit(main())
