"""``fleetperf cleanup``: stop what interrupted runs left on their hosts, and mark them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands import common
from tui.commands.common import Subcommand
from tui.core.term import printable


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--inventory", type=Path, default=None, help="the hosts' inventory (never a record's)"
    )
    p.add_argument("--results", type=Path, default=None)
    p.add_argument("--data-root", type=Path, default=None)
    common.store_argument(p)


def cmd_cleanup(args: argparse.Namespace) -> int:
    """playbooks/stop.yml for every interrupted run of this machine not cleaned yet, on the
    hosts of -i (the default inventory without it); another machine's runs are listed."""
    code, cleaned = 0, 0
    session = common.session(args)
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


COMMAND = Subcommand(
    "cleanup",
    "stop what interrupted runs left on their hosts, and mark them",
    _arguments,
    cmd_cleanup,
)
