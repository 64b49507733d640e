"""``fleetperf serve``: the app in a browser; and the app itself, started here for the
command line without a subcommand too (tui/app/, textual: imported only when asked for)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands import common
from tui.commands.common import Subcommand
from tui.core.errors import InventoryError, UsageError
from tui.core.paths import DEFAULT_INVENTORY


def _arguments(p: argparse.ArgumentParser) -> None:
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


def start_app(name: str, *args: object) -> int:
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
    where = (inventory, common.results_dir(args), common.data_root(args))
    return start_app("serve", args.host, args.port, args.allow_write, *where)


COMMAND = Subcommand(
    "serve",
    "the app in a browser, for you only",
    _arguments,
    cmd_serve,
    "Serve the app over HTTP (textual-serve). It prints a URL with a token made for this"
    " start: only a page opened from that URL gets the app. The store: FLEETPERF_STORE or"
    " ~/.config/fleetperf/store, else RESULTS/fleetperf.sqlite (docs/store.md).",
)
