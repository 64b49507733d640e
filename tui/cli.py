"""Command line: the terminal app by default, ``--batch`` headless, and the subcommands.

One parser: the app's and the batch's options, then ``SUBCOMMANDS``, the table of the
subcommands (tui/commands/, one module each: its name, help line, arguments, the function
it runs and what that prints). Here: the options given before a subcommand, the dispatch,
and the app and --batch started."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from importlib import metadata
from pathlib import Path

from tui.commands import (
    cases,
    cleanup,
    fleet,
    images,
    new_case,
    peak,
    prepare,
    provision,
    qualify,
    report,
    results,
    serve,
    store,
)
from tui.commands.cases import cmd_cases  # noqa: F401 - tests/cases/test_smoke.py calls it here
from tui.commands.common import STORE_HELP
from tui.commands.common import data_root as _data_root
from tui.commands.common import results_dir as _results_dir
from tui.commands.common import stores as _stores  # noqa: F401 - the tests read it here
from tui.commands.serve import start_app
from tui.core.errors import InventoryError, UserInputError
from tui.core.paths import DEFAULT_INVENTORY
from tui.core.term import printable
from tui.results.tables import FORMATS

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
# The subcommands, in the order ``fleetperf --help`` lists them.
SUBCOMMANDS = tuple(
    m.COMMAND
    for m in (
        cases,
        prepare,
        results,
        report,
        store,
        cleanup,
        new_case,
        peak,
        serve,
        fleet,
        provision,
        qualify,
        images,
    )
)


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
        if args.command is not None or args.batch:
            gc.enable()  # off for the imports (tui/launch.py); the app's first frame: on_ready
        if args.command is not None:
            return next(c for c in SUBCOMMANDS if c.name == args.command).run(args)
        if not args.batch:  # the app, on the inventory, results and data root given
            inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
            if not inventory.is_file():  # refused here, not on the Hosts screen
                raise InventoryError(f"inventory {inventory}: no such file")
            where = (inventory, _results_dir(args), _data_root(args))
            return start_app("main", False, *where, args.store)
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
