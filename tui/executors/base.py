"""What every executor shares: the kinds a host's ``fleetperf_executor`` may name, the
``Executor`` protocol the engine drives, a run's ``Launch`` (its plan) and ``Outcome``,
run ids, and the status a run ends with. docs/executors.md: what an executor is, and how
to add one (tui/executors/registry.py maps each kind to its executor)."""

from __future__ import annotations

import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from harness.staging import DATA_MANIFEST

from tui.catalog import caseimports, images
from tui.catalog.catalog import RunSpec
from tui.core import liveness
from tui.core.events import CaseResult, Event, RunStatus
from tui.core.paths import REPO_ROOT
from tui.core.stream import Reach
from tui.executors.extravars import declared
from tui.executors.hostfiles import HOST_ARCHIVE, HOST_FILES, host_file_limits

# Kinds a host's fleetperf_executor names (tui/executors/registry.py: all of them, each with
# its executor). Unset: DEFAULT_KIND, as playbooks/group_vars/all.yml says for the plays.
DEFAULT_KIND = "process"  # a process under the host's Python
DOCKER = "docker"  # the vendor's image, which planning checks (tui/catalog/images.py)
SLURM = "slurm"  # a login host submitting one job a run; its group holds only login hosts
POLL_S = 30.0  # longest hold of one poll while nothing happens (it returns on new lines)


def new_run_id(case: str) -> str:
    """STAMP-CASE-TOKEN, TOKEN 16 hex digits: 64 random bits, so that no two controllers
    on one results directory draw the same id (four digits collided within one 32-run batch;
    the store refuses the rare repeat, tui/results/store.py). Tables show the token's first
    digits."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{case}-{secrets.token_hex(8)}"


def _case_path(case_dir: Path) -> str:
    """Relative to the repository (hosts have their own checkout), unless it lies outside."""
    return str(case_dir.relative_to(REPO_ROOT) if case_dir.is_relative_to(REPO_ROOT) else case_dir)


def controller_vars(results_dir: Path, data_root: Path) -> dict[str, str]:
    """What hosts that share the controller's files need to find them (inventory/local.yml)."""
    return {
        "fleetperf_controller_root": str(REPO_ROOT),
        "fleetperf_controller_python": sys.executable,
        "fleetperf_controller_data_root": str(data_root),
        "fleetperf_controller_results": str(results_dir),
    }


def _controller() -> dict[str, Any]:
    """Who holds a host lease: this controller's liveness lease, from which a host on the
    same machine and PID namespace can prove it gone (fleetperf_host.controller_gone)."""
    return asdict(liveness.this_controller())


@dataclass
class Launch:
    """Where one case run goes: its spec, hosts and directories."""

    spec: RunSpec
    run_id: str
    hosts: list[str]
    inventory: Path
    results_dir: Path
    data_root: Path
    lease_wait_s: float = 0.0  # how long preflight waits for a host another run holds
    executor: str = DEFAULT_KIND  # the hosts' fleetperf_executor (tui/executors/registry.py)
    # Hosts whose events file the controller follows itself (tui/core/stream.py), and how.
    follow: dict[str, Reach] = field(default_factory=dict)
    # Executor docker: the image's tag and context hash, checked on the hosts (run.yml).
    image: images.Expected | None = None
    # A run on this machine alone (tui/executors/direct.py): its host's vars, rendered;
    # None: the run goes through its kind's playbook.
    local: dict[str, Any] | None = None

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
            "smoke": spec.smoke,  # no target: the harness passes a finite loss
        }

    def extravars(self) -> dict[str, Any]:
        """run.yml's and slurm.yml's extra vars (playbooks/vars/extra_vars.yml)."""
        spec = self.spec
        values = {
            "fleetperf_run_id": self.run_id,
            "fleetperf_case": spec.case.name,
            "fleetperf_case_path": _case_path(spec.case.dir),
            "fleetperf_entrypoint": spec.case.entrypoint,
            "fleetperf_config": self.config_json(),
            "fleetperf_requires": spec.case.requires,
            "fleetperf_hosts": self.hosts,
            "fleetperf_nnodes": spec.config.nnodes,
            "fleetperf_nproc_per_node": spec.config.nproc_per_node,
            "fleetperf_timeout_s": spec.case.timeout_s,
            "fleetperf_stall_s": spec.case.stall_s,
            "fleetperf_poll_s": POLL_S,
            "fleetperf_controller": _controller(),
            "fleetperf_lease_wait_s": self.lease_wait_s,
            "fleetperf_fetch_dir": str(self.run_dir / "hosts"),
            "fleetperf_host_files": list(HOST_FILES),
            "fleetperf_host_archive": HOST_ARCHIVE,
            "fleetperf_host_file_limits": host_file_limits(),
            "fleetperf_data_manifest": DATA_MANIFEST,
            "fleetperf_config_env": spec.config.env,  # catalog-checked; {data_dir}: the plays
            "fleetperf_imports": {
                m: caseimports.distribution(m)
                for m in caseimports.required(spec.case.dir, spec.case.entrypoint, images.HARNESS)
            },
            "fleetperf_follow": {
                host: "here" if how.ssh is None else "ssh" for host, how in self.follow.items()
            },
            # Docker hosts: the image, tagged by a hash of what builds it (tui/catalog/images.py).
            "fleetperf_expected_image": self.image.tag if self.image else "",
            "fleetperf_expected_context": self.image.context if self.image else "",
            **controller_vars(self.results_dir, self.data_root),
        }
        return declared("run", values)


@dataclass
class Outcome:
    status: RunStatus  # passed, failed, aborted or bad_input
    error: str | None = None
    result: CaseResult | None = None
    # From the hosts' preflights: the highest load per CPU among them, and whether the
    # data was synthetic (True if on any host; None where no host's data says).
    load_per_cpu: float | None = None
    synthetic_data: bool | None = None
    # What the run's kind records of it (the record's executor_detail: a Slurm job's id,
    # partition, nodes and state), in its own terms.
    detail: dict[str, Any] | None = None
    # Executor docker: the id of the image each host's container ran (its preflight checked it).
    image_ids: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a host sent that was refused


def run_status(
    *,
    cancelled: bool,
    bad_input: str | None,
    launched: bool,
    rc: int,
    runner_status: str,
    result: CaseResult | None,
    errors: list[str],
) -> tuple[RunStatus, str | None]:
    """A run's status, and why unless it passed. Passed needs both the workload's passed
    result and a playbook that ended well: a play that fails after the result (a stop, a
    fetch) fails the run."""
    if cancelled:
        return "aborted", "aborted by the operator"
    if bad_input and not launched:
        return "bad_input", bad_input
    if result and result.status != "passed":
        return "failed", result.message or f"the workload reported {result.status}"
    if result and rc == 0:
        return "passed", None
    return "failed", (errors or [f"ansible-runner ended {runner_status}"])[0]


# A run as the engine hands it to its executor: its launch, where its events go, its cancel.
Started = tuple[Launch, Callable[[Event], None], threading.Event]


class Executor(Protocol):
    """Runs the runs of one batch that start together on its kind of host (their hosts
    disjoint) and folds each run's events into its outcome. The engine makes one for the
    runs of each executor that start together, calls ``run`` on a thread of its own and
    ``outcome`` on each run's thread; the stops are for runs it cannot follow to their end
    (an internal error, ``fleetperf cleanup`` after a controller died)."""

    def __init__(self, runs: list[Started]) -> None: ...

    def run(self) -> None:
        """The work the runs share (one play over all their hosts), until it ends."""

    def outcome(self, run_id: str) -> Outcome:
        """Block until the run has ended on its hosts; how it ended."""

    def discard(self, run_id: str) -> None:
        """Remove the directory of a run refused before it started (nothing ran)."""

    @staticmethod
    def stop(launches: list[Launch]) -> None:
        """Stop these runs' work on all their hosts, and bring back their files."""

    @staticmethod
    def cleanup(
        run_id: str, hosts: list[str], inventory: Path, results_dir: Path, data_root: Path
    ) -> dict[str, str]:
        """Stop a run this controller did not launch (its controller died): each host's
        outcome, "stopped" or why not (tui/executors/stop.py)."""
