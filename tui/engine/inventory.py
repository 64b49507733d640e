"""The inventory as our playbooks see it, and the hosts a run goes to."""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.catalog.catalog import RunSpec
from tui.core.errors import InventoryError
from tui.executors.ansiblerun import PLAYBOOKS
from tui.executors.base import DEFAULT_KIND, SLURM
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


def load_inventory(path: Path) -> Inventory:
    """The inventory as ``ansible-inventory -i PATH --list --playbook-dir playbooks`` gives
    it (the playbooks' group_vars counted as a play would see them), read in this process
    with Ansible's own classes: no process start and JSON round trip per plan (issue 33)."""
    if not path.is_file():
        raise InventoryError(f"inventory {path}: no such file")
    from ansible.errors import AnsibleError  # ansible's import is paid only by a plan

    try:
        with _ANSIBLE:
            data = _inventory_list(path)
    except AnsibleError as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        raise InventoryError(f"inventory {path}: {lines[0] if lines else 'unreadable'}") from None
    hostvars = (data.pop("_meta", None) or {}).get("hostvars", {})
    return Inventory(path=path, groups=data, hostvars=hostvars)


# Ansible's objects share process-wide state (the plugin loader, the vault secrets).
_ANSIBLE = threading.Lock()


@functools.cache
def _vault_secrets() -> list[Any]:
    """The vault secrets ansible-inventory sets up (the configured identities and
    ANSIBLE_VAULT_PASSWORD_FILE, never a prompt), once: Ansible keeps them per process."""
    from ansible import constants as C
    from ansible.cli import CLI
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader()
    vault_ids = list(C.DEFAULT_VAULT_IDENTITY_LIST)
    return CLI.setup_vault_secrets(DataLoader(), vault_ids=vault_ids, auto_prompt=False)


def _inventory_list(path: Path) -> dict[str, Any]:
    """What ``ansible-inventory --list`` prints (ansible/cli/inventory.py: json_inventory,
    its host variables and its JSON encoder), as Python values. Ansible's warnings (a
    source no plugin parses) are kept out of the terminal, as they were in the captured
    stderr of the process this replaces."""
    from ansible import constants as C
    from ansible._internal import _display_utils
    from ansible._internal._json._profiles import _inventory_legacy
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import add_all_plugin_dirs
    from ansible.vars.manager import VariableManager

    secrets = _vault_secrets()
    with _display_utils.DeferredWarningContext(variables={}):
        loader = DataLoader()
        loader.set_basedir(str(PLAYBOOKS))
        add_all_plugin_dirs(str(PLAYBOOKS))
        loader.set_vault_secrets(secrets)
        inventory = InventoryManager(loader=loader, sources=[str(path)])
        variables = VariableManager(loader=loader, inventory=inventory)
        hosts = inventory.get_hosts("all")
        names = frozenset(h.name for h in hosts)
        out: dict[str, Any] = {}

        def add_group(group: Any) -> None:
            node: dict[str, list[str]] = {}
            if group.name != "all":
                node["hosts"] = [h.name for h in group.hosts if h.name in names]
            node["children"] = [child.name for child in group.child_groups]
            out[group.name] = {k: v for k, v in node.items() if v}
            for child in group.child_groups:
                if child.name not in out:
                    add_group(child)
            if not out[group.name]:
                del out[group.name]

        add_group(inventory.groups["all"])
        hostvars = {}
        for host in hosts:
            hvars = variables.get_vars(host=host, include_hostvars=False, stage="all")
            for name in C.INTERNAL_STATIC_VARS:
                hvars.pop(name, None)
            if hvars:
                hostvars[host.name] = hvars
        out["_meta"] = {"hostvars": hostvars}
        # its encoder: the same plain values (vaulted ones as {"__ansible_vault": ...})
        return json.loads(json.dumps(out, cls=_inventory_legacy.Encoder))


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
    inventory order (the first is the master). A group of Slurm login hosts gives one
    of them: Slurm chooses the nodes (checked before the job is submitted)."""
    cfg = spec.config
    group = inv.group_hosts(cfg.vendor)
    logins = [h for h in group if executor_of(inv, h) == SLURM]
    if logins and len(logins) != len(group):
        raise InventoryError(
            f"inventory {inv.path}: group {cfg.vendor!r} mixes Slurm login hosts"
            f" ({', '.join(logins)}) with other hosts: give Slurm a group of its own"
        )
    if logins:
        return [min(logins, key=lambda h: (used or {}).get(h, 0))]
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
