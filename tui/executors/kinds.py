"""Each kind of host's rules, as hooks the engine calls without naming the kind
(docs/executors.md): its settings checked, which hosts of a group a run gets, what refuses
a plan, what a launch carries, the image a host shows, the executor that runs it. Hooks
take plain values (host names, a host-var lookup, the run's spec), so that no executor
imports the engine; tui/executors/registry.py holds one of each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.catalog import images
from tui.catalog.catalog import CatalogError, RunSpec
from tui.executors.base import DEFAULT_KIND, DOCKER, SLURM, Executor, Launch
from tui.executors.play import Play
from tui.executors.slurm import Slurm

HostVar = Callable[[str, str], Any]  # (host, name) -> the host var, None where unset


@dataclass(frozen=True)
class Placed:
    """A run about to launch, as a kind's ``prepare`` sees it: ``hostvars`` its first
    host's, ``here`` the controller's vars (base.controller_vars)."""

    spec: RunSpec
    hosts: list[str]
    var: HostVar
    hostvars: Mapping[str, Any]
    inventory: Path
    here: dict[str, str]


class Kind:
    """A kind's rules; these defaults are the process kind's (a workload run as a process
    under the host's Python, through run.yml), which the other kinds refine."""

    name = DEFAULT_KIND
    executor: type[Executor] = Play

    def check_settings(self) -> None:
        """UsageError for a setting of the controller's environment this kind reads."""

    def pick(self, group: list[str], used: Mapping[str, int]) -> list[str] | None:
        """The hosts a run gets from a vendor group of this kind's hosts (InventoryError
        for a group it cannot take); None: the engine's own choice by chip and devices."""
        return None

    def mixed(self, own: list[str]) -> str:
        """Why a group that mixes this kind's hosts (``own``) with others is refused, where
        ``pick`` takes whole groups."""
        return f"mixes {self.name} hosts ({', '.join(own)}) with others: give them a group"

    def check_plan(self, spec: RunSpec, hosts: list[str], var: HostVar) -> None:
        """Refuse a run on ``hosts`` before anything starts (CatalogError, one line)."""

    def prepare(self, run: Placed) -> dict[str, Any]:
        """What the launch of ``run`` carries for this kind (Launch's fields)."""
        return {}

    def image(self, host: str, var: HostVar) -> str | None:
        """The image the host's runs use (the tag its preflight insists on; "" where
        none can be named); None: the kind runs no image."""
        return None

    def image_probe(self, image: str) -> tuple[str, str]:
        """The ad-hoc module and its arguments that succeed on a host where ``image`` (a
        checked name) is present."""
        raise NotImplementedError(f"{self.name} hosts run no image")

    def executor_for(self, launch: Launch) -> type[Executor]:
        return self.executor


class Process(Kind):
    """A run on one host of this machine alone goes direct (tui/executors/direct.py)."""

    def check_settings(self) -> None:
        from tui.executors import direct  # and jinja2: not imported until a run is planned

        direct.enabled()

    def prepare(self, run: Placed) -> dict[str, Any]:
        from tui.executors import direct

        if len(run.hosts) != 1 or not direct.enabled():
            return {}
        return {
            "local": direct.local_vars(run.hosts[0], dict(run.hostvars), run.inventory, run.here)
        }

    def executor_for(self, launch: Launch) -> type[Executor]:
        from tui.executors.direct import Direct

        return Direct if launch.local is not None else self.executor


class Docker(Kind):
    """The vendor's image: refused at planning when it lacks what the case imports."""

    name = DOCKER

    def check_plan(self, spec: RunSpec, hosts: list[str], var: HostVar) -> None:
        vendor = spec.config.vendor
        if images.has_image(vendor):
            problem = images.lacks(vendor, spec.case.dir, spec.case.entrypoint)
            if problem:
                raise CatalogError(f"{spec.case.name} {spec.config.ref}: {problem}")

    def prepare(self, run: Placed) -> dict[str, Any]:
        vendor = run.spec.config.vendor
        if not images.has_image(vendor):
            return {}
        # The tag covers the base image the hosts build on (fleetperf_base_image).
        base = run.var(run.hosts[0], "fleetperf_base_image")
        return {"image": images.expected(vendor, str(base) if base else None)}

    def image(self, host: str, var: HostVar) -> str | None:
        base = var(host, "fleetperf_base_image")
        vendor = str(var(host, "fleetperf_vendor") or "")
        return images.expected_image(vendor, str(base) if base else None) or ""

    def image_probe(self, image: str) -> tuple[str, str]:
        return "ansible.builtin.command", f"docker image inspect {image}"


class SlurmLogin(Kind):
    """A login host submitting one job a run: its group holds only login hosts, and a
    run gets one of them (the least used); Slurm chooses the nodes."""

    name = SLURM
    executor = Slurm

    def pick(self, group: list[str], used: Mapping[str, int]) -> list[str] | None:
        return [min(group, key=lambda h: used.get(h, 0))]

    def mixed(self, own: list[str]) -> str:
        return (
            f"mixes Slurm login hosts ({', '.join(own)}) with other hosts:"
            " give Slurm a group of its own"
        )
