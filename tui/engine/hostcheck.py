"""The Hosts screen's work, through ansible-runner: read the inventory, preflight hosts
(setup: reachability, chip, device count; image state), run provision.yml with per-host,
per-task events. Blocking calls, run from the app's thread workers; no textual here."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.vendors import VENDORS

from tui.core.paths import REPO_ROOT
from tui.engine.inventory import Inventory
from tui.executors.ansiblerun import ansible_run, on_steps
from tui.executors.base import DEFAULT_KIND
from tui.executors.kinds import Kind
from tui.executors.registry import KINDS
from tui.executors.steps import Step

PROVISION = REPO_ROOT / "provision.yml"
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9./:_@-]*")  # fullmatch: no final newline


@dataclass(frozen=True)
class HostCheck:
    host: str
    reachable: bool
    message: str = ""
    chip: str | None = None
    devices: str | None = None  # "8", "2 vCPU"; None when unknown
    image: str | None = None


def groups(inv: Inventory) -> dict[str, list[str]]:
    """Every group that has hosts, vendor groups first."""
    names = sorted((g for g in inv.groups if g != "all"), key=lambda g: (g not in VENDORS, g))
    return {g: hosts for g in names if (hosts := inv.group_hosts(g))}


def all_hosts(inv: Inventory) -> list[str]:
    return list(dict.fromkeys(h for hosts in groups(inv).values() for h in hosts))


def _vendor(inv: Inventory, host: str) -> str | None:
    return next((g for g in VENDORS if host in inv.group_hosts(g)), None)


def adhoc(inventory: Path, hosts: list[str], module: str, args: str) -> dict[str, dict]:
    """One ad-hoc module run; per host the last result event ("ok", "failed", ...)."""
    results: dict[str, dict] = {}

    def keep(step: Step) -> None:
        if step.host:
            results[step.host] = {"kind": step.state, **step.res}

    with tempfile.TemporaryDirectory(prefix="fleetperf-preflight-") as private:
        ansible_run(
            Path(private),
            inventory,
            forks=max(len(hosts), 5),
            host_pattern=",".join(hosts),
            module=module,
            module_args=args,
            event_handler=on_steps(keep),
        )
    return results


def preflight(inv: Inventory, hosts: list[str]) -> dict[str, HostCheck]:
    """setup on every host, then the image state where the host runs containers."""
    facts = adhoc(inv.path, hosts, "ansible.builtin.setup", "gather_subset=min,hardware")
    images: dict[str, str] = {}
    by_image: dict[tuple[Kind, str], list[str]] = {}
    for host in hosts:
        name = str(inv.var(host, "fleetperf_executor") or DEFAULT_KIND)
        kind = KINDS.get(name)
        # The tag run.yml's preflight insists on: a hash of what builds the image.
        image = kind.image(host, inv.var) if kind else None
        if kind is None or image is None:
            images[host] = f"not used ({ascii(name)[1:-1][:40]} executor)"
        elif not _IMAGE.fullmatch(image):
            images[host] = "no images/<vendor> for this host's fleetperf_vendor"
        elif facts.get(host, {}).get("kind") == "ok":
            by_image.setdefault((kind, image), []).append(host)
    for (kind, name), image_hosts in by_image.items():
        found = adhoc(inv.path, image_hosts, *kind.image_probe(name))
        for host in image_hosts:
            res = found.get(host, {})
            images[host] = f"{name} present" if res.get("rc") == 0 else f"{name} missing"
    return {h: _check(h, inv, facts.get(h), images.get(h)) for h in hosts}


def _check(host: str, inv: Inventory, res: dict | None, image: str | None) -> HostCheck:
    if res is None or res.get("kind") != "ok":
        msg = " ".join(str((res or {}).get("msg") or "no answer").split())
        return HostCheck(host, False, msg)
    facts = res.get("ansible_facts") or {}
    local = (facts.get("ansible_local") or {}).get("fleetperf") or {}
    chip = local.get("chip") or inv.var(host, "fleetperf_chip")
    count = inv.var(host, "fleetperf_devices")
    if "accelerator_count" in local and _vendor(inv, host) != "cpu":
        devices = str(local["accelerator_count"])  # what provisioning found in lspci
    elif count is not None:
        devices = str(count)  # what the inventory declares
    elif _vendor(inv, host) == "cpu" and facts.get("ansible_processor_vcpus"):
        devices = f"{facts['ansible_processor_vcpus']} vCPU"
    else:
        devices = None  # an accelerator host not provisioned yet: facts role writes the count
    return HostCheck(host, True, "", chip, devices, image)


TASK_STATUSES = ("ok", "failed", "skipped", "unreachable")


@dataclass(frozen=True)
class TaskEvent:
    host: str
    task: str
    status: str  # ok, changed, failed, skipped, unreachable
    role: str = ""  # "" for a task outside a role
    result: dict[str, Any] = field(default_factory=dict)  # the module's result (msg, diff)


def provision(
    inventory: Path,
    hosts: list[str],
    check: bool,
    on_task: Callable[[TaskEvent], None],
    cancel: Callable[[], bool] = lambda: False,
) -> dict[str, dict[str, int]]:
    """provision.yml on ``hosts`` (``--check --diff`` when check); per-host stats."""
    stats: dict[str, dict[str, int]] = {}

    def task(step: Step) -> None:
        status: str = step.state
        if step.host and status in TASK_STATUSES:
            if status == "ok" and step.res.get("changed"):
                status = "changed"
            on_task(TaskEvent(step.host, step.task, status, step.role, dict(step.res)))

    def play_stats(data: dict[str, Any]) -> None:
        for key in ("ok", "changed", "failures", "skipped", "dark"):
            for host, n in (data.get(key) or {}).items():
                stats.setdefault(host, {})[key] = n

    with tempfile.TemporaryDirectory(prefix="fleetperf-provision-") as private:
        ansible_run(
            Path(private),
            inventory,
            forks=max(len(hosts), 5),
            playbook=str(PROVISION),
            limit=",".join(hosts),
            cmdline="--check --diff" if check else None,
            event_handler=on_steps(task, play_stats),
            cancel_callback=cancel,
        )
    return stats
