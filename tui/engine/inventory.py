"""The inventory as our playbooks see it, and the hosts a run goes to."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tui.catalog.catalog import RunSpec
from tui.core import usercache
from tui.core.errors import InventoryError
from tui.executors.ansiblerun import PLAYBOOKS, ansible_env
from tui.executors.base import DEFAULT_KIND
from tui.executors.registry import KINDS


@dataclass(frozen=True)
class Inventory:
    """An inventory as ansible sees it for our playbooks (their group_vars included)."""

    path: Path
    groups: dict[str, Any]
    hostvars: dict[str, dict[str, Any]]

    def group_hosts(self, group: str) -> list[str]:
        node = self.groups.get(group) or {}
        hosts = list(node.get("hosts", []))
        for child in node.get("children", []):
            hosts += [h for h in self.group_hosts(child) if h not in hosts]
        return hosts

    def var(self, host: str, name: str) -> Any:
        """A host variable, None where unset or a template only a play can render."""
        value = self.hostvars.get(host, {}).get(name)
        return None if isinstance(value, str) and "{{" in value else value

    def candidates(self, vendor: str, chip: str, devices: int) -> list[str]:
        """Hosts of the vendor's group whose chip (``fleetperf_chip``) is ``chip`` and that
        have at least ``devices`` devices (``fleetperf_devices``, where set)."""
        out = []
        for host in self.group_hosts(vendor):
            host_chip, count = self.var(host, "fleetperf_chip"), self.var(host, "fleetperf_devices")
            if host_chip is not None and str(host_chip).lower() != chip.lower():
                continue
            if count is not None and int(count) < devices:
                continue
            out.append(host)
        return out


def _listing_key(path: Path) -> str | None:
    """What ``ansible-inventory --list`` of a static inventory file depends on, hashed: the
    file, the group_vars and host_vars beside it and the playbooks', ansible's config files,
    the environment it runs with, ansible's version. None where the listing may change
    without any of them (an executable inventory, an inventory plugin's config) or may
    hold what a vault decrypts (an encrypted file or value)."""
    text = path.read_bytes()
    if os.access(path, os.X_OK) or re.search(rb"^\s*plugin\s*:", text, re.MULTILINE):
        return None
    found = [path]
    for base in (path.parent, PLAYBOOKS):
        for sub in ("group_vars", "host_vars"):
            found += sorted(p for p in (base / sub).rglob("*") if p.is_file())
    env = ansible_env()
    configs = [Path("ansible.cfg"), Path.home() / ".ansible.cfg", Path("/etc/ansible/ansible.cfg")]
    if "ANSIBLE_CONFIG" in env:
        configs.append(Path(env["ANSIBLE_CONFIG"]))
    digest = hashlib.sha256(json.dumps([version("ansible-core"), env], sort_keys=True).encode())
    for file in found + [c for c in configs if c.is_file()]:
        data = file.read_bytes()
        if b"$ANSIBLE_VAULT" in data or b"!vault" in data:
            return None
        digest.update(f"{file.resolve()}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def load_inventory(path: Path) -> Inventory:
    """``ansible-inventory --list`` with the playbooks' directory, so their group_vars
    (chips, executors, images) count as a play would see them. A static inventory's listing
    is kept (private, in the user's cache directory) and read again while nothing it
    depends on changed: ansible-inventory costs a run 0.3 CPU-s (issue 33)."""
    if not path.is_file():
        raise InventoryError(f"inventory {path}: no such file")
    key = _listing_key(path)
    kept = usercache.read("inventory", key) if key else None
    with contextlib.suppress(KeyError, TypeError):  # damaged: listed again
        return Inventory(path=path, groups=kept["groups"], hostvars=kept["hostvars"])
    argv = [
        str(Path(sys.executable).parent / "ansible-inventory"),
        "-i",
        str(path),
        "--list",
        "--playbook-dir",
        str(PLAYBOOKS),
    ]
    proc = subprocess.run(argv, env=ansible_env(), capture_output=True, text=True, check=False)
    try:
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise InventoryError(f"inventory {path}: {lines[-1] if lines else 'unreadable'}")
    hostvars = (data.pop("_meta", None) or {}).get("hostvars", {})
    if key:
        usercache.write("inventory", key, {"groups": data, "hostvars": hostvars})
    return Inventory(path=path, groups=data, hostvars=hostvars)


def executor_of(inv: Inventory, host: str) -> str:
    """The host's ``fleetperf_executor``, DEFAULT_KIND where unset; InventoryError for a
    kind no executor serves."""
    kind = inv.var(host, "fleetperf_executor")
    if kind is None or kind == "":
        return DEFAULT_KIND
    if kind not in KINDS:
        raise InventoryError(
            f"inventory {inv.path}: host {host}: fleetperf_executor {kind!r}: not one of"
            f" {', '.join(KINDS)}"
        )
    return str(kind)


def select_hosts(inv: Inventory, spec: RunSpec, used: dict[str, int] | None = None) -> list[str]:
    """``nnodes`` hosts that fit the config, the least used so far first, kept in
    inventory order (the first is the master); or the hosts a kind picks from a group of
    its own (a Slurm login host: Slurm chooses the nodes)."""
    cfg = spec.config
    group = inv.group_hosts(cfg.vendor)
    kinds = {h: KINDS[executor_of(inv, h)] for h in group}
    for kind in dict.fromkeys(kinds.values()):
        own = [h for h in group if kinds[h] is kind]
        picked = kind.pick(own, used or {})
        if picked is not None and len(own) != len(group):
            raise InventoryError(f"inventory {inv.path}: group {cfg.vendor!r} {kind.mixed(own)}")
        if picked is not None:
            return picked
    fits = inv.candidates(cfg.vendor, cfg.chip, cfg.nproc_per_node)
    if len(fits) < cfg.nnodes:
        which = "" if len(fits) == len(group) else f" with chip {cfg.chip}"
        if len(fits) != len(group) and any(inv.var(h, "fleetperf_devices") for h in group):
            which += f" and {cfg.nproc_per_node}+ devices"
        raise InventoryError(
            f"inventory {inv.path}: group {cfg.vendor!r} has {len(fits)} host(s){which}, "
            f"the config needs {cfg.nnodes}"
        )
    used = used or {}
    chosen = set(sorted(fits, key=lambda h: (used.get(h, 0), fits.index(h)))[: cfg.nnodes])
    return [h for h in fits if h in chosen]
