"""``fleetperf provision``'s run of provision.yml through a Session: the hosts ``--limit``
picks, the run, and what it did per host and role (tui/engine/provision.py words it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui.engine import provision
from tui.engine.session import Session


@dataclass(frozen=True)
class Provisioned:
    hosts: list[str]
    lines: list[str]  # per host: its changes by role, or why it stopped
    failed: list[str]  # the hosts that failed or were unreachable


def provision_hosts(
    session: Session, limit: str | None, check: bool, starting: Callable[[list[str]], None]
) -> Provisioned:
    """provision.yml on the vendor groups' hosts ``limit`` names (all without it);
    ``starting`` with the hosts once they are known, before the run. UserInputError for an
    inventory or a ``--limit`` that names no such host: nothing runs."""
    hosts = provision.pick_hosts(session.read_inventory(), limit)
    starting(hosts)
    outcomes: dict[str, provision.Outcome] = {}
    stats = session.provision(hosts, check, lambda ev: provision.collect(outcomes, ev))
    failed = provision.settle(hosts, outcomes, stats)
    return Provisioned(hosts, provision.summary(hosts, outcomes, check), failed)
