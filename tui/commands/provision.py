"""``fleetperf provision``: provision.yml on the inventory's hosts, told per host and role."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands.common import Subcommand
from tui.core.errors import UserInputError
from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir
from tui.core.term import printable
from tui.engine.session import Session


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i", "--inventory", type=Path, default=None, help=f"default {DEFAULT_INVENTORY}"
    )
    p.add_argument("--limit", metavar="HOST[,HOST]", help="these hosts only")
    p.add_argument(
        "--check", action="store_true", help="check mode: what would change, changing nothing"
    )


def cmd_provision(args: argparse.Namespace) -> int:
    """provision.yml on the vendor groups' hosts (tui/engine/provisioning.py), told per host
    and role; 1 when a host failed or was unreachable."""
    from tui.engine.provisioning import provision_hosts

    inventory = (args.inventory or DEFAULT_INVENTORY).resolve()
    session = Session(inventory, default_results_dir(), default_data_root())
    mode = "check mode: nothing is changed" if args.check else "changes the hosts"

    def starting(hosts: list[str]) -> None:
        line = f"provision.yml on {', '.join(hosts)} of {inventory} ({mode}); this takes minutes"
        print(printable(line), flush=True)

    try:
        done = provision_hosts(session, args.limit, args.check, starting)
    except UserInputError as exc:
        print(printable(f"fleetperf provision: error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # ansible, in our process group, got the SIGINT too
        print("fleetperf provision: interrupted; run it again to finish", file=sys.stderr)
        return 130
    print(printable("\n".join(done.lines)))
    if done.failed:
        print(
            printable(f"fleetperf provision: failed on {', '.join(done.failed)}"), file=sys.stderr
        )
        return 1
    return 0


COMMAND = Subcommand(
    "provision",
    "provision.yml on the inventory's hosts, told per host and role (--check: a preview)",
    _arguments,
    cmd_provision,
    "Run provision.yml on the hosts of the inventory's vendor groups and say what"
    " changed per host and role; with --check, what would change (nothing is).",
)
