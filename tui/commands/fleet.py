"""``fleetperf fleet``: SSH hosts on this machine (tui/localfleet/): ``up N [--slurm]``,
``down``; the test tools ``degrade HOST [--cpu FRACTION] [--link-rate RATE]``, ``restore
HOST`` (docs/testing.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tui.commands.common import Subcommand
from tui.localfleet import degrade
from tui.localfleet import fleet as localfleet
from tui.localfleet.hosts import available
from tui.localfleet.slurm import slurm_available


def _arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="bring up N hosts and write an inventory for them")
    up.add_argument("count", type=int, metavar="N")
    up.add_argument(
        "--slurm", action="store_true", help="and a Slurm cluster: a login host, N nodes"
    )
    down = sub.add_parser("down", help="stop the hosts and remove what up made")
    # Test tools (docs/testing.md): a host made slow on purpose, for qualify to name.
    degrading = sub.add_parser("degrade", help="test tool: a CPU quota, a link rate on a host")
    degrading.add_argument("--cpu", metavar="FRACTION", help="its share of this machine's CPUs")
    degrading.add_argument("--link-rate", metavar="RATE", help="as tc writes it: 100mbit, 1gbit")
    restore = sub.add_parser("restore", help="test tool: remove what degrade set on a host")
    where = localfleet.DEFAULT_DIR
    for q in (degrading, restore):
        q.add_argument("host", metavar="HOST")
    for q in (up, down, degrading, restore):
        q.add_argument("--dir", type=Path, default=where, help=f"default {where}")


def cmd_fleet(args: argparse.Namespace) -> int:
    if args.action in ("degrade", "restore"):
        cpu, rate = getattr(args, "cpu", None), getattr(args, "link_rate", None)  # degrade's
        return _degrade(args.action, args.dir.resolve(), args.host, cpu, rate)
    count, slurm = getattr(args, "count", 0), getattr(args, "slurm", False)  # up's only
    return _up_down(args.action, args.dir.resolve(), count, slurm)


def _error(text: str) -> int:
    print(f"fleetperf fleet: error: {text}", file=sys.stderr)
    return 2


def _up_down(action: str, workdir: Path, count: int, slurm: bool) -> int:
    """``up N [--slurm] [--dir DIR]``: the inventory's path; ``down [--dir DIR]``."""
    reason = available()
    if reason:
        return _error(reason)
    try:
        if action == "up":
            if not 1 <= count <= 253:
                return _error("N: 1 to 253 hosts")
            if slurm and (reason := slurm_available()):
                return _error(reason)
            print(localfleet.up(count, workdir, slurm))
        else:
            print(f"fleetperf fleet: {localfleet.down(workdir)} host(s) down in {workdir}")
    except RuntimeError as exc:
        return _error(str(exc))
    return 0


def _degrade(action: str, workdir: Path, name: str, cpu: str | None, link_rate: str | None) -> int:
    """``degrade HOST [--cpu FRACTION] [--link-rate RATE]`` and ``restore HOST``."""
    try:
        if action == "degrade" and cpu is None and link_rate is None:
            raise degrade.DegradeError(f"degrade {name}: give --cpu FRACTION, --link-rate RATE")
        fraction = None if cpu is None else degrade.parse_fraction(cpu)
        bits = None if link_rate is None else degrade.parse_rate(link_rate)
        host = localfleet.fleet_host(workdir, name)
        if action == "restore":
            degrade.restore(host)
            print(f"fleetperf fleet: {name}: restored (no CPU quota, no link rate)")
            return 0
        if fraction is not None:
            group, quota, cpus = degrade.limit_cpu(host, fraction)
            print(
                f"fleetperf fleet: {name}: CPU quota {fraction:g} of {cpus} CPU(s)"
                f" ({quota}/{degrade.PERIOD_US} us, cgroup {group})"
            )
        if bits is not None:
            degrade.limit_link(host, bits)
            print(f"fleetperf fleet: {name}: link rate {bits} bit/s both ways (tc tbf)")
    except (degrade.DegradeError, RuntimeError, OSError) as exc:  # OSError: a cgroup file
        return _error(str(exc))
    return 0


COMMAND = Subcommand(
    "fleet",
    "SSH hosts on this machine to try fleetperf on (as root): up N, down; degrade, restore",
    _arguments,
    cmd_fleet,
)
