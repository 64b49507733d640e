"""``fleetperf new-case NAME``: write cases/NAME/ from a template (docs/new-case.md)."""

from __future__ import annotations

import argparse

from tui.commands.common import Subcommand


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")


def cmd_new_case(args: argparse.Namespace) -> int:
    from tui.catalog.newcase import new_case

    print(f"wrote {new_case(args.name)} (next: docs/new-case.md)")
    return 0


COMMAND = Subcommand(
    "new-case", "write cases/NAME/ from a template (docs/new-case.md)", _arguments, cmd_new_case
)
