"""Inventory and ansible-runner: choose hosts, launch a case, stream its events, clean up."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import ansible_runner

from tui.catalog import REPO_ROOT, CatalogError, RunSpec
from tui.events import CaseResult, Event, HostState, WorkloadError, from_runner

PLAYBOOKS = REPO_ROOT / "playbooks"
POLL_S = 1.0  # longest wait of one poll when nothing new arrived

Status = Literal["passed", "failed", "aborted", "bad_input"]


def _ansible_on_path() -> dict[str, str]:
    """ansible-runner looks its commands up on PATH: put this interpreter's bin dir first."""
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        os.environ["PATH"] = f"{bindir}{os.pathsep}{path}"
    return {"PATH": os.environ["PATH"], "ANSIBLE_NOCOLOR": "1"}


def new_run_id(case: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{case}-{secrets.token_hex(2)}"


def _group_hosts(inv: dict[str, Any], group: str) -> list[str]:
    node = inv.get(group) or {}
    hosts = list(node.get("hosts", []))
    for child in node.get("children", []):
        hosts += [h for h in _group_hosts(inv, child) if h not in hosts]
    return hosts


def select_hosts(inventory: Path, vendor: str, nnodes: int) -> list[str]:
    """The first ``nnodes`` hosts of the inventory group named after the vendor."""
    if not inventory.is_file():
        raise CatalogError(f"inventory {inventory}: no such file")
    _ansible_on_path()
    out, err = ansible_runner.get_inventory(
        "list", [str(inventory)], response_format="json", quiet=True
    )
    if not isinstance(out, dict):
        first = (err or str(out)).strip().splitlines()
        raise CatalogError(f"inventory {inventory}: {first[-1] if first else 'unreadable'}")
    hosts = _group_hosts(out, vendor)
    if len(hosts) < nnodes:
        raise CatalogError(
            f"inventory {inventory}: group {vendor!r} has {len(hosts)} host(s), "
            f"the config needs {nnodes}"
        )
    return hosts[:nnodes]


def _case_path(case_dir: Path) -> str:
    """Relative to the repository (hosts have their own checkout), unless it lies outside."""
    return str(case_dir.relative_to(REPO_ROOT) if case_dir.is_relative_to(REPO_ROOT) else case_dir)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


@dataclass
class Launch:
    """Where one case run goes: its spec, hosts and directories."""

    spec: RunSpec
    run_id: str
    hosts: list[str]
    inventory: Path
    results_dir: Path
    data_root: Path

    @property
    def run_dir(self) -> Path:
        return self.results_dir / "runs" / self.run_id

    def config_json(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "run_id": self.run_id,
            "case": spec.case.name,
            "vendor": spec.config.vendor,
            "chip": spec.config.chip,
            "nnodes": spec.config.nnodes,
            "nproc_per_node": spec.config.nproc_per_node,
            "precision": spec.precision,
            "hp": spec.hp,
            "fix_hp": spec.fix_hp,
        }

    def extravars(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "fleetperf_run_id": self.run_id,
            "fleetperf_case": spec.case.name,
            "fleetperf_case_path": _case_path(spec.case.dir),
            "fleetperf_entrypoint": spec.case.entrypoint,
            "fleetperf_config": self.config_json(),
            "fleetperf_requires": spec.case.requires,
            "fleetperf_hosts": self.hosts,
            "fleetperf_nnodes": spec.config.nnodes,
            "fleetperf_nproc_per_node": spec.config.nproc_per_node,
            "fleetperf_controller_master_port": _free_port(),
            "fleetperf_timeout_s": spec.case.timeout_s,
            "fleetperf_stall_s": spec.case.stall_s,
            "fleetperf_poll_s": POLL_S,
            "fleetperf_fetch_dir": str(self.run_dir / "hosts"),
            "fleetperf_controller_root": str(REPO_ROOT),
            "fleetperf_controller_python": sys.executable,
            "fleetperf_controller_data_root": str(self.data_root),
            "fleetperf_controller_results": str(self.results_dir),
        }


@dataclass
class Outcome:
    status: Status
    error: str | None = None
    result: CaseResult | None = None
    started: str = ""
    finished: str = ""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Tracker:
    """Folds the event stream into what the outcome needs, and keeps a log of it."""

    def __init__(self, log_path: Path, on_event: Callable[[Event], None]) -> None:
        self.log = log_path.open("a", encoding="utf-8")
        self.on_event = on_event
        self.result: CaseResult | None = None
        self.errors: list[str] = []
        self.bad_input: str | None = None
        self.launched = False

    def __call__(self, raw: dict[str, Any]) -> bool:
        received = time.time()
        for ev in from_runner(raw, received):
            self._fold(ev)
            self.on_event(ev)
        return True  # let ansible-runner keep its own artifacts too

    def _fold(self, ev: Event) -> None:
        if isinstance(ev, HostState):
            if ev.message and not ev.message.startswith(f"host {ev.host}"):
                ev = replace(ev, message=f"host {ev.host}: {ev.phase}: {ev.message}")
            if ev.phase == "running":
                self.launched = True
            elif ev.play == "Preflight" and self.bad_input is None:
                self.bad_input = ev.message
            elif ev.message:
                self.errors.append(ev.message)
        else:
            record = {"host": ev.host, "type": type(ev).__name__, **_public(ev)}
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()
        if isinstance(ev, CaseResult):
            self.result = ev
        elif isinstance(ev, WorkloadError):
            self.errors.insert(0, f"host {ev.host} rank {ev.rank}: {ev.message}")


def _public(ev: Event) -> dict[str, Any]:
    return {name: getattr(ev, name) for name in ev.__slots__}  # type: ignore[union-attr]


def run_case(
    launch: Launch,
    on_event: Callable[[Event], None],
    cancel: threading.Event | None = None,
) -> Outcome:
    """Run one case through playbooks/run.yml; blocks until it ends, is cancelled, or fails."""
    cancel = cancel or threading.Event()
    run_dir = launch.run_dir
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(launch.config_json(), indent=2) + "\n")
    tracker = _Tracker(run_dir / "events.jsonl", on_event)
    started = _now()
    try:
        runner = _run_playbook(
            launch, "run.yml", event_handler=tracker, cancel_callback=cancel.is_set
        )
        if cancel.is_set():  # Ctrl-C may also have stopped ansible-playbook before its cleanup
            stop(launch)
    finally:
        tracker.log.close()
    outcome = Outcome(
        status="failed",
        result=tracker.result,
        started=started,
        finished=_now(),
    )
    if cancel.is_set():
        outcome.status, outcome.error = "aborted", "aborted by the operator"
    elif tracker.bad_input and not tracker.launched:
        outcome.status, outcome.error = "bad_input", tracker.bad_input
    elif runner.rc == 0 and tracker.result and tracker.result.status == "passed":
        outcome.status = "passed"
    elif tracker.result and tracker.result.status != "passed":
        outcome.error = tracker.result.message or f"the workload reported {tracker.result.status}"
    else:
        outcome.error = (tracker.errors or [f"ansible-runner ended {runner.status}"])[0]
    return outcome


def stop(launch: Launch) -> None:
    """Stop the workload everywhere (playbooks/stop.yml); used after a cancel."""
    _run_playbook(launch, "stop.yml")


def _run_playbook(launch: Launch, playbook: str, **kwargs: Any) -> ansible_runner.Runner:
    """ansible-runner on one of our playbooks; its artifacts go under the run directory."""
    private = launch.run_dir / f"ansible-{Path(playbook).stem}"
    private.mkdir(parents=True, exist_ok=True)
    return ansible_runner.run(
        private_data_dir=str(private),
        project_dir=str(REPO_ROOT),
        playbook=str(PLAYBOOKS / playbook),
        inventory=str(launch.inventory),
        extravars=launch.extravars(),
        envvars=_ansible_on_path(),
        forks=max(len(launch.hosts), 5),
        quiet=True,
        **kwargs,
    )
