"""What ``fleetperf provision [-i INVENTORY] [--limit HOSTS] [--check]``
(tui/commands/provision.py) tells of a run of provision.yml on the hosts of an inventory's
vendor groups, through the Hosts screen's ansible-runner path (tui/engine/hostcheck.py), as
a person reads it: per host and role, each task that changed something (``--check``: would
change) and what, then each host that failed and why. Ansible's own output (a few hundred
lines) is not shown; ``ansible-playbook ... --check --diff`` gives the diffs in full
(docs/provisioning.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.vendors import VENDORS

from tui.core.errors import InventoryError, UsageError
from tui.engine import hostcheck
from tui.engine.inventory import Inventory
from tui.executors.ansiblerun import explain_unreachable


def vendor_hosts(inv: Inventory) -> list[str]:
    """The hosts provision.yml plays on: those of the vendor groups."""
    return list(dict.fromkeys(h for group in VENDORS for h in inv.group_hosts(group)))


def pick_hosts(inv: Inventory, limit: str | None) -> list[str]:
    """The hosts ``--limit`` names (default: all), each refused unless provision.yml plays
    on it: no run starts for a mistyped name."""
    hosts = vendor_hosts(inv)
    if not hosts:
        raise InventoryError(
            f"inventory {inv.path}: no host in a vendor group ({', '.join(VENDORS)})"
        )
    if limit is None:
        return hosts
    wanted = [h for h in (name.strip() for name in limit.split(",")) if h]
    known = f"(hosts of {inv.path}: {', '.join(hosts)})"
    if not wanted:
        raise UsageError(f"--limit {limit!r}: names no host {known}")
    unknown = [h for h in wanted if h not in hosts]
    if unknown:
        raise UsageError(f"--limit {limit!r}: {unknown[0]} is not a host of a vendor group {known}")
    return list(dict.fromkeys(wanted))


def _file_change(diff: dict[str, Any]) -> str:
    """A path and how it changes, from one diff of copy, template or file."""
    before, after = diff.get("before"), diff.get("after")
    if isinstance(before, dict) and isinstance(after, dict):  # file: attributes
        path = after.get("path") or before.get("path") or ""
        if before.get("state") == "absent":
            return f"{path} (new {after.get('state', 'file')})"
        changed = [f"{k} {before.get(k)} -> {v}" for k, v in after.items() if before.get(k) != v]
        return f"{path} ({', '.join(changed)})" if changed else str(path)
    path = diff.get("after_header") or diff.get("before_header") or ""
    return f"{path} (new file)" if path and before == "" else str(path)


def what_changed(host: str, result: dict[str, Any]) -> str:
    """In a few words, what one changed task did or would do: a "Report ..." task's
    message, the paths in its diff, or the path or name (user, package) the module acted
    on; a loop's changed items, joined. "" when the result says no more than its task's name."""
    if isinstance(result.get("results"), list):
        items = [
            what_changed(host, r)
            for r in result["results"]
            if isinstance(r, dict) and r.get("changed")
        ]
        return ", ".join(i for i in items if i)
    msg = result.get("msg")
    if isinstance(msg, str) and msg.strip():
        return " ".join(msg.split()).removeprefix(f"{host}: ")  # one line per change
    diffs = result.get("diff")
    diffs = [diffs] if isinstance(diffs, dict) else diffs if isinstance(diffs, list) else []
    paths = [p for d in diffs if isinstance(d, dict) and (p := _file_change(d))]
    if paths:
        return ", ".join(dict.fromkeys(paths))
    if result.get("dest") or result.get("path"):
        return str(result.get("dest") or result.get("path"))
    name = ((result.get("invocation") or {}).get("module_args") or {}).get("name")  # user, apt
    return ", ".join(map(str, name)) if isinstance(name, list) else str(name or "")


@dataclass
class Outcome:
    """One host's run: its changes by role, in order, and what stopped it."""

    changes: dict[str, list[str]] = field(default_factory=dict)
    failure: str = ""


def collect(outcomes: dict[str, Outcome], ev: hostcheck.TaskEvent) -> None:
    """Fold one task event into its host's outcome."""
    outcome = outcomes.setdefault(ev.host, Outcome())
    if ev.status == "changed":
        detail = what_changed(ev.host, ev.result)
        line = f"{ev.task}: {detail}" if detail else ev.task
        outcome.changes.setdefault(ev.role or "(play)", []).append(line)
    elif ev.status in ("failed", "unreachable"):
        msg = " ".join(str(ev.result.get("msg") or "no message").split())
        stderr = str(ev.result.get("stderr") or "").strip().splitlines()
        if stderr:  # a command's "non-zero return code" says no more
            msg += f" ({stderr[-1].strip()})"
        if ev.status == "unreachable":
            outcome.failure = f"unreachable: {explain_unreachable(ev.host, msg)}"
        else:
            outcome.failure = f"failed at {ev.role or 'the play'}, {ev.task!r}: {msg}"


def summary(hosts: list[str], outcomes: dict[str, Outcome], check: bool) -> list[str]:
    """Per host: its count of changes, then per role each change; or why it stopped."""
    lines = []
    for host in hosts:
        outcome = outcomes.get(host, Outcome())
        count = sum(len(c) for c in outcome.changes.values())
        made, none = ("to make", "nothing to change") if check else ("made", "nothing changed")
        if count:
            head = f"{host}: {count} change(s) {made}, in {len(outcome.changes)} role(s)"
            head += f"; then {outcome.failure}" if outcome.failure else ""
        else:
            head = f"{host}: {outcome.failure or none}"
        lines.append(head)
        for role, changes in outcome.changes.items():
            lines.append(f"  {role}: {len(changes)} change(s)")
            lines += [f"    {change}" for change in changes]
    return lines


def settle(hosts: list[str], outcomes: dict[str, Outcome], stats: dict[str, dict]) -> list[str]:
    """The hosts that failed, once a host ansible gave no recap for (it stopped before: its
    error is in no event) is marked so."""
    for host in hosts:
        if host not in stats and not outcomes.get(host, Outcome()).failure:
            outcomes.setdefault(host, Outcome()).failure = "provision.yml did not play on it"
    return [h for h in hosts if outcomes.get(h, Outcome()).failure]
