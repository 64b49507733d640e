"""What several subcommands share: the table row each module declares, the store option, and
the results directory, data root, stores and Session the global options name."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui.core import paths
from tui.core.errors import UsageError
from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir
from tui.core.term import printable
from tui.engine.session import Session

if TYPE_CHECKING:
    from pathlib import Path

    from tui.engine.storeops import Merged

STORE_HELP = (
    "the results store: a SQLite file, sqlite:///PATH or postgresql://USER@HOST/DB"
    " (default: FLEETPERF_STORE, else ~/.config/fleetperf/store's line, else"
    " RESULTS/fleetperf.sqlite; docs/store.md)"
)


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str  # its line in ``fleetperf --help``
    arguments: Callable[[argparse.ArgumentParser], None]  # adds its arguments
    run: Callable[[argparse.Namespace], int]  # its exit status
    description: str | None = None  # ``fleetperf NAME --help``'s, where more than the help


def store_argument(p: argparse.ArgumentParser, several: bool = False) -> None:
    more = "; repeat it to read several stores as one" if several else ""
    p.add_argument("--store", dest="stores", metavar="URL", action="append", help=STORE_HELP + more)


def results_dir(args: argparse.Namespace) -> Path:
    return (args.results or default_results_dir()).resolve()


def data_root(args: argparse.Namespace) -> Path:
    return (args.data_root or default_data_root()).resolve()


def stores(args: argparse.Namespace) -> list[str]:
    """The stores named: a subcommand's --store (several where it takes them; one given
    before its name is among them), else --batch's or the app's, else the default
    (tui/core/paths.py default_store)."""
    given = getattr(args, "stores", None) or ([args.store] if args.store else [])
    return given or [paths.default_store(results_dir(args))]


def store(args: argparse.Namespace) -> str:
    """The one store named, for a command that takes one."""
    named = stores(args)
    if len(named) > 1:
        raise UsageError(f"--store given {len(named)} times: this command takes one")
    return named[0]


def session(args: argparse.Namespace) -> Session:
    """The engine on the results directory, data root and store given (no inventory)."""
    inventory = getattr(args, "inventory", None) or DEFAULT_INVENTORY  # cleanup's -i
    return Session(inventory.resolve(), results_dir(args), data_root(args), store=store(args))


@contextmanager
def writing(output: Path) -> Iterator[None]:
    """The file ``-o OUTPUT`` written within: an OSError becomes one line naming it."""
    try:
        yield
    except OSError as exc:
        raise UsageError(f"-o {output}: {exc.strerror}") from None


def read_stores(args: argparse.Namespace) -> Merged:
    """The runs of the stores named (--store more than once), read as one; a run id found
    in two of them said on stderr."""
    from tui.engine import storeops  # the store's database libraries: loaded now

    merged = storeops.read_stores(stores(args))
    for note in merged.notes:
        print(printable(f"fleetperf: {note}"), file=sys.stderr)
    return merged
