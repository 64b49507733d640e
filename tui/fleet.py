"""Inventory and ansible-runner: choose hosts, launch a case, stream its events, clean up."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from ansible_runner import Runner, RunnerConfig
from ansible_runner.utils import get_callback_dir

from tui import caseimports, images
from tui.catalog import DATA_MANIFEST, REPO_ROOT, CatalogError, RunSpec
from tui.events import (
    PREFLIGHT_ACTION,
    TAIL_ACTION,
    CaseResult,
    Event,
    HostState,
    WorkloadError,
    as_dict,
    blame,
    from_runner,
    parse_line,
    task_action,
)
from tui.extravars import declared
from tui.stream import SSH_SAFETY, Follower, Reach

# The Slurm executor's modules (playbooks/slurm.yml) whose results the tracker reads.
SLURM_CHECK, SLURM_SUBMIT, SLURM_POLL = (
    "fleetperf_slurm_check",
    "fleetperf_slurm_submit",
    "fleetperf_slurm_poll",
)

PLAYBOOKS = REPO_ROOT / "playbooks"
IMAGE_ACTION = "fleetperf_image"  # run.yml's image check: the id that the launch runs
POLL_S = 30.0  # longest hold of one poll while nothing happens (it returns on new lines)
DRAIN_S = 5.0  # longest wait at a host's end for its follower to hand on the last lines
# What a run leaves in a host's run directory that the controller keeps.
HOST_FILES = ("events.jsonl", "stdout.log", "stderr.log", "exit_code", "config.json")

Status = Literal["passed", "failed", "aborted", "bad_input"]


# The controller's environment variables that ansible may see, by exact name: nothing
# else of the operator's shell (tokens, cloud keys, ANSIBLE_VERBOSITY, plugin settings
# such as ANSIBLE_HASHI_VAULT_ROLE_ID) reaches ansible, the hosts or the run's artifacts.
_ENV_KEEP = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSH_AUTH_SOCK"),
        # Where the operator keeps the vault password, key and become password: paths only.
        "ANSIBLE_VAULT_PASSWORD_FILE",
        "ANSIBLE_PRIVATE_KEY_FILE",
        "ANSIBLE_BECOME_PASSWORD_FILE",
        "ANSIBLE_CONNECTION_PASSWORD_FILE",
        "ANSIBLE_REMOTE_USER",
    }
)
# What ansible-runner adds to the environment itself (its callback, its artifacts).
_RUNNER_KEEP = frozenset(
    {
        "ANSIBLE_STDOUT_CALLBACK",
        "ANSIBLE_RETRY_FILES_ENABLED",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS",
        "AD_HOC_COMMAND_ID",
        "AWX_ISOLATED_DATA_DIR",
        "RUNNER_OMIT_EVENTS",
        "RUNNER_ONLY_FAILED_EVENTS",
    }
)
# Ansible's own ssh options (its defaults: compression, connection sharing), then host key
# checking and keepalives, first so that they win over the inventory's (ssh keeps the
# first value of an option).
SSH_ARGS = ("-C", "-o", "ControlMaster=auto", "-o", "ControlPersist=60s", *SSH_SAFETY)


def ansible_env() -> dict[str, str]:
    """The environment ansible-runner and ansible-inventory run with: an allow-list of
    the controller's, with this interpreter's bin directory first on PATH, host key
    checking on and ssh keepalives."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    bindir = str(Path(sys.executable).parent)
    path = env.get("PATH", os.defpath)
    if bindir not in path.split(os.pathsep):
        path = f"{bindir}{os.pathsep}{path}"
    env.update(
        PATH=path,
        ANSIBLE_NOCOLOR="1",
        # ansible-runner turns checking off where the environment does not say.
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_SSH_ARGS=shlex.join(SSH_ARGS),
    )
    return env


# What ssh says (through Ansible) of a host key it does not know, or that changed: the
# name it looked up, "[address]:port" off port 22.
_KEY_UNKNOWN = re.compile(r"No \S+ host key is known for (\S+) and you have requested strict")
_KEY_CHANGED = re.compile(r"Host key for (\S+) has changed and you have requested strict")


def explain_unreachable(host: str, message: str) -> str:
    """An ssh failure as the operator should read it: a host key that ssh does not know,
    or that changed, is named with its fix (no key is ever accepted blindly)."""
    unknown, changed = _KEY_UNKNOWN.search(message), _KEY_CHANGED.search(message)
    found = unknown or changed
    if not found:
        return message
    address, port = found[1], None
    if bracketed := re.fullmatch(r"\[(.+)\]:(\d+)", address):
        address, port = bracketed[1], bracketed[2]
    fix = f"ssh-keyscan {f'-p {port} ' if port else ''}{address} >> ~/.ssh/known_hosts"
    if changed:
        fix = f"ssh-keygen -R {found[1]}; {fix}"
    what = "is not known" if unknown else "has CHANGED (another machine may be answering)"
    return (
        f"host {host}: the SSH host key of {found[1]} {what}; once you have checked that the"
        f" host is genuine, record its key: {fix} (or in the inventory's UserKnownHostsFile)"
    )


def new_run_id(case: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{case}-{secrets.token_hex(2)}"


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
    """``ansible-inventory --list`` with the playbooks' directory, so their group_vars
    (chips, executors, images) count as a play would see them."""
    if not path.is_file():
        raise CatalogError(f"inventory {path}: no such file")
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
        raise CatalogError(f"inventory {path}: {lines[-1] if lines else 'unreadable'}")
    hostvars = (data.pop("_meta", None) or {}).get("hostvars", {})
    return Inventory(path=path, groups=data, hostvars=hostvars)


def executor(inv: Inventory, host: str) -> str:
    return str(inv.var(host, "fleetperf_executor") or "process")


def select_hosts(inv: Inventory, spec: RunSpec, used: dict[str, int] | None = None) -> list[str]:
    """``nnodes`` hosts that fit the config, the least used so far first, kept in
    inventory order (the first is the master). A group of Slurm login hosts gives one
    of them: Slurm chooses the nodes (checked before the job is submitted)."""
    cfg = spec.config
    group = inv.group_hosts(cfg.vendor)
    logins = [h for h in group if executor(inv, h) == "slurm"]
    if logins and len(logins) != len(group):
        raise CatalogError(
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
        raise CatalogError(
            f"inventory {inv.path}: group {cfg.vendor!r} has {len(fits)} host(s){which}, "
            f"the config needs {cfg.nnodes}"
        )
    used = used or {}
    chosen = set(sorted(fits, key=lambda h: (used.get(h, 0), fits.index(h)))[: cfg.nnodes])
    return [h for h in fits if h in chosen]


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
    """Who holds a host lease: a host sees whether this process is gone (same boot)."""
    boot_id = Path("/proc/sys/kernel/random/boot_id")
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "boot_id": boot_id.read_text().strip() if boot_id.exists() else None,
    }


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
    executor: str = "process"  # the hosts' fleetperf_executor; slurm: playbooks/slurm.yml
    # Hosts whose events file the controller follows itself (tui/stream.py), and how.
    follow: dict[str, Reach] = field(default_factory=dict)
    # Executor docker: the image's tag and context hash, checked on the hosts (run.yml).
    image: images.Expected | None = None

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
            "fleetperf_data_manifest": DATA_MANIFEST,
            "fleetperf_imports": {
                m: caseimports.distribution(m)
                for m in caseimports.required(spec.case.dir, spec.case.entrypoint, images.HARNESS)
            },
            "fleetperf_follow": {
                host: "here" if how.ssh is None else "ssh" for host, how in self.follow.items()
            },
            # Docker hosts: the image, tagged by a hash of what builds it (tui/images.py).
            "fleetperf_expected_image": self.image.tag if self.image else "",
            "fleetperf_expected_context": self.image.context if self.image else "",
            **controller_vars(self.results_dir, self.data_root),
        }
        return declared("run", values)


@dataclass
class Outcome:
    status: Status
    error: str | None = None
    result: CaseResult | None = None
    started: str = ""
    finished: str = ""
    # From the hosts' preflights: the highest load per CPU among them, and whether the
    # data was synthetic (True if on any host; None where no host's data says).
    load_per_cpu: float | None = None
    synthetic_data: bool | None = None
    slurm: dict[str, Any] | None = None  # job_id, partition, nodes, state (executor slurm)
    # Executor docker: the id of the image each host's container ran (its preflight checked it).
    image_ids: dict[str, str] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Tracker:
    """Folds the event stream into what the outcome needs, and keeps a log of it. Events
    come from ansible-runner's thread and from the followers' threads."""

    def __init__(self, launch: Launch, on_event: Callable[[Event], None]) -> None:
        self.run_id = launch.run_id
        self.log = (launch.run_dir / "events.jsonl").open("a", encoding="utf-8")
        self.on_event = on_event
        self.result: CaseResult | None = None
        self.failures: list[WorkloadError | HostState] = []  # as observed: blame() orders
        self.bad_input: str | None = None
        self.phases = dict.fromkeys(launch.hosts, "preflight")
        self.launched = False  # a workload started on some host
        self.follow = launch.follow
        self.followers: dict[str, Follower] = {}
        self.host_dirs: dict[str, Path] = {}  # run dirs of hosts that share our files
        self.hosts_seen: dict[str, dict[str, Any]] = {}  # what each host's preflight saw
        self.slurm: dict[str, Any] | None = None  # the Slurm job, as its polls saw it
        self.image_ids: dict[str, str] = {}  # host -> the image id its container ran
        self._lock = threading.Lock()

    def __call__(self, raw: dict[str, Any]) -> bool:
        received = time.time()
        data = raw.get("event_data") or {}
        host, res = data.get("host", ""), data.get("res") or {}
        if raw.get("event") == "runner_on_ok" and task_action(data) in (
            PREFLIGHT_ACTION,
            SLURM_CHECK,
        ):
            self.hosts_seen[host] = {k: res.get(k) for k in ("load_per_cpu", "synthetic_data")}
        # The image id the preflight checked is the one the launch runs (run.yml); the
        # launch's own result is masked where a no_log env value occurs in it.
        checked = raw.get("event") == "runner_on_ok" and task_action(data) == IMAGE_ACTION
        if checked and res.get("image_id"):
            self.image_ids[host] = str(res["image_id"])
        if task_action(data) in (SLURM_SUBMIT, SLURM_POLL) and raw.get("event") in (
            "runner_on_ok",
            "runner_retry",
        ):
            self._slurm(host, task_action(data), res)
        if raw.get("event") == "runner_on_ok" and host in self.follow:
            # Followed from the preflight on, so the workload's first line is not waited for.
            if task_action(data) == PREFLIGHT_ACTION and res.get("events"):
                self._start_follower(host, str(res["events"]))
            elif task_action(data) == TAIL_ACTION and res.get("exit_code") is not None:
                # The host's end comes after every line its workload wrote before it.
                self._drain(host, int(res.get("events_bytes") or 0))
        if raw.get("event") == "runner_on_unreachable" and isinstance(res.get("msg"), str):
            msg = explain_unreachable(host, res["msg"])
            raw = {**raw, "event_data": {**data, "res": {**res, "msg": msg}}}
        for ev in from_runner(self.run_id, raw, received):
            self.emit(ev)
        return False  # ansible-runner keeps no job_events: they would hold module arguments

    def _start_follower(self, host: str, events: str, how: Reach | None = None) -> None:
        """Follow ``events`` (on ``host``, or through ``how``: a Slurm node's file seen
        from its login host); its lines are ``host``'s."""
        how = how or self.follow[host]
        if host in self.followers:
            return
        if how.ssh is None:
            self.host_dirs[host] = Path(events).parent

        def on_line(line: str) -> None:
            if ev := parse_line(self.run_id, host, line):
                self.emit(ev)

        self.followers[host] = Follower(how.argv(events), on_line)

    def _slurm(self, login: str, action: str, res: dict[str, Any]) -> None:
        """A Slurm job's life as the login host's phases: queued (with Slurm's pending
        reason), running (on the nodes named), finished; each node's events file followed
        from the login host once the job runs there."""
        job = str(res.get("job_id") or "")
        if action == SLURM_SUBMIT:
            self.slurm = {"job_id": job, "partition": res.get("partition") or None, "nodes": []}
            self.emit(HostState(self.run_id, login, "queued", f"slurm job {job} submitted"))
            return
        state, reason, nodes = res.get("state"), res.get("reason") or "", res.get("nodes") or []
        last = dict(self.slurm or {})
        self.slurm = {
            **last,
            "job_id": job,
            "partition": res.get("partition") or last.get("partition"),
            "nodes": nodes or last.get("nodes", []),
            "state": state,
        }
        if (state, reason, nodes) == last.get("_seen"):
            return
        self.slurm["_seen"] = (state, reason, nodes)
        if state == "PENDING":
            why = f" ({reason})" if reason else ""
            self.emit(HostState(self.run_id, login, "queued", f"slurm job {job} pending{why}"))
        elif state == "RUNNING" and nodes:
            msg = f"slurm job {job} running on {', '.join(nodes)}"
            self.emit(HostState(self.run_id, login, "running", msg))
        run_dir = Path(str(res.get("run_dir") or ""))
        if login in self.follow and res.get("run_dir"):
            for node in nodes:
                events = run_dir / "nodes" / node / "events.jsonl"
                self._start_follower(node, str(events), self.follow[login])
        if res.get("finished"):
            for node, size in (res.get("events_bytes") or {}).items():
                self._drain(node, int(size or 0))
            if res.get("exit_code") == 0:
                self.emit(HostState(self.run_id, login, "finished"))

    def _drain(self, host: str, size: int) -> None:
        if follower := self.followers.get(host):
            follower.drain(size, DRAIN_S)  # short of it: recover() reads the rest

    def close_followers(self) -> None:
        for follower in self.followers.values():
            follower.close()

    def recover(self, fetch_dir: Path) -> None:
        """Lines a follower missed (its ssh connection dropped and the host came back):
        read from the host's events file brought back by the cleanup, so none is lost."""
        for host, follower in self.followers.items():
            path = fetch_dir / host / "events.jsonl"
            if not path.is_file() or path.stat().st_size <= follower.received:
                continue
            with path.open("rb") as f:
                f.seek(follower.received)
                rest = f.read().decode("utf-8", "replace")
            for line in rest.splitlines():
                if ev := parse_line(self.run_id, host, line):
                    self.emit(ev)

    def emit(self, ev: Event) -> None:
        with self._lock:
            if isinstance(ev, HostState):
                ev = self._fold_host(ev)
            else:
                self.log.write(json.dumps(as_dict(ev)) + "\n")
                self.log.flush()
            if isinstance(ev, CaseResult):
                self.result = ev
            elif isinstance(ev, WorkloadError):
                self.failures.append(ev)
            self.on_event(ev)

    def _fold_host(self, ev: HostState) -> HostState:
        failed = ev.phase in ("failed", "unreachable")  # a Slurm job's phases say their own
        if failed and ev.message and not ev.message.startswith(f"host {ev.host}"):
            ev = replace(ev, message=f"host {ev.host}: {ev.phase}: {ev.message}")
        if ev.phase in ("running", "queued"):  # queued: a Slurm job was submitted
            self.launched = True
        elif ev.phase in ("failed", "unreachable"):
            # Before any workload started, a failure is the input's or the host's: refused.
            if not self.launched and self.bad_input is None:
                self.bad_input = ev.message
            elif ev.message:
                self.failures.append(ev)
        self.phases[ev.host] = ev.phase
        return ev

    def stopped(self) -> None:
        """Hosts still marked running after the play were stopped by its cleanup."""
        for host, phase in list(self.phases.items()):
            if phase == "running":
                self.emit(HostState(self.run_id, host, "stopped"))


def _copy_host_files(host_dirs: dict[str, Path], fetch_dir: Path) -> None:
    """What the play's fetch does for other hosts, for hosts that share our files: regular
    files only, never through a link (the workload writes its run dir;
    playbooks/module_utils/fleetperf_host.py does the same on hosts)."""
    for host, src in host_dirs.items():
        dest = fetch_dir / host
        dest.mkdir(parents=True, exist_ok=True)
        for name in HOST_FILES:
            try:  # O_NONBLOCK: a FIFO opens at once, and is then left out as not regular
                fd = os.open(src / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:  # missing, or a link (ELOOP)
                continue
            with open(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    with open(dest / name, "wb") as out:
                        shutil.copyfileobj(f, out)


def _synthetic(per_host: list[bool | None]) -> bool | None:
    """Synthetic if any host's data was; real only if every host's data says so."""
    if True in per_host:
        return True
    return False if per_host and all(v is False for v in per_host) else None


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
    tracker = _Tracker(launch, on_event)
    started = _now()
    try:
        for host in launch.hosts:
            tracker.emit(HostState(launch.run_id, host, "preflight"))
        playbook = "slurm.yml" if launch.executor == "slurm" else "run.yml"
        runner = _run_playbook(
            launch, playbook, event_handler=tracker, cancel_callback=cancel.is_set
        )
        if cancel.is_set():  # Ctrl-C may also have stopped ansible-playbook before its cleanup
            stop(launch)
        tracker.close_followers()
        _copy_host_files(tracker.host_dirs, run_dir / "hosts")
        tracker.recover(run_dir / "hosts")
        tracker.stopped()
    finally:
        tracker.close_followers()
        tracker.log.close()
    seen = tracker.hosts_seen.values()
    loads = [v["load_per_cpu"] for v in seen if v["load_per_cpu"] is not None]
    status, error = verdict(
        cancelled=cancel.is_set(),
        bad_input=tracker.bad_input,
        launched=tracker.launched,
        rc=runner.rc,
        runner_status=runner.status,
        result=tracker.result,
        errors=blame(tracker.failures),
    )
    return Outcome(
        status=status,
        error=error,
        result=tracker.result,
        started=started,
        finished=_now(),
        load_per_cpu=max(loads, default=None),
        synthetic_data=_synthetic([v["synthetic_data"] for v in seen]),
        slurm={k: v for k, v in tracker.slurm.items() if k != "_seen"} if tracker.slurm else None,
        image_ids=tracker.image_ids,
    )


def verdict(
    *,
    cancelled: bool,
    bad_input: str | None,
    launched: bool,
    rc: int,
    runner_status: str,
    result: CaseResult | None,
    errors: list[str],
) -> tuple[Status, str | None]:
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


def stop(launch: Launch) -> None:
    """Stop the workload everywhere (playbooks/stop.yml); used after a cancel."""
    _run_playbook(launch, "stop.yml")


def stop_run(
    run_id: str, hosts: list[str], inventory: Path, results_dir: Path, data_root: Path
) -> bool:
    """playbooks/stop.yml for a run this controller did not launch (cleanup after a
    controller died); True if it ran to the end."""
    run_dir = results_dir / "runs" / run_id
    kill_leftover_ansible(run_dir)
    extravars = {
        "fleetperf_run_id": run_id,
        "fleetperf_hosts": hosts,
        "fleetperf_fetch_dir": str(run_dir / "hosts"),
        "fleetperf_host_files": list(HOST_FILES),
        **controller_vars(results_dir, data_root),
    }
    extravars = declared("stop", extravars)
    runner = _runner(run_dir / "ansible-cleanup", "stop.yml", inventory, extravars, len(hosts))
    return runner.rc == 0


def _ansible_of(run_dir: Path) -> list[int]:
    """Processes still running ansible for the run in ``run_dir``: their command line names
    one of the run's extra vars files (``ansible_run``), which no other run's can."""
    marks = {
        f"@{private}/env/extravars".encode()
        for private in run_dir.glob("ansible-*")
        if private.is_dir() and not private.is_symlink()
    }
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(a.endswith(b"ansible-playbook") for a in argv[:3]) and marks & set(argv):
            found.append(int(proc.name))
    return found


def kill_leftover_ansible(run_dir: Path, grace_s: float = 5.0) -> None:
    """End the ansible-playbook processes an interrupted run left (a controller killed
    before the die-with-parent guard, or on an older fleetperf): SIGTERM, which ansible
    passes to its workers, then SIGKILL for what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _ansible_of(run_dir)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            time.sleep(0.1)
            pids = _ansible_of(run_dir)
        if not pids:
            return


def _run_playbook(launch: Launch, playbook: str, **kwargs: Any) -> Runner:
    """ansible-runner on one of our playbooks; its artifacts go under the run directory."""
    private = launch.run_dir / f"ansible-{Path(playbook).stem}"
    return _runner(
        private, playbook, launch.inventory, launch.extravars(), len(launch.hosts), **kwargs
    )


def _runner(
    private: Path,
    playbook: str,
    inventory: Path,
    extravars: dict[str, Any],
    hosts: int,
    event_handler: Callable[[dict[str, Any]], bool] | None = None,
    cancel_callback: Callable[[], bool] | None = None,
) -> Runner:
    return ansible_run(
        private,
        inventory,
        forks=max(hosts, 5),
        playbook=str(PLAYBOOKS / playbook),
        extravars=extravars,
        event_handler=event_handler,
        cancel_callback=cancel_callback,
    )


class _UnsafeDumper(yaml.SafeDumper):
    """YAML for ansible's extra vars: the whole document tagged ``!unsafe``."""


class _Unsafe(dict):  # type: ignore[type-arg]
    pass


_UnsafeDumper.add_representer(_Unsafe, lambda d, v: d.represent_mapping("!unsafe", v))


def _write_extravars(private: Path, extravars: dict[str, Any]) -> None:
    """``env/extravars``, which ansible-runner hands to ansible as ``-e @file``: tagged
    ``!unsafe`` as a whole, so that no value in it (the config, hyperparameters, run id,
    paths, host names) is ever rendered as a template. ansible-core keeps the tags of what
    lies inside, so a quoted "123" stays a string (``!unsafe`` on a single scalar would
    re-read it as a number). Not on the command line: it stays out of ``ps`` and of the
    ``command`` artifact."""
    env_dir = private / "env"
    env_dir.mkdir(exist_ok=True)
    text = yaml.dump(_Unsafe(extravars), Dumper=_UnsafeDumper, sort_keys=False, allow_unicode=True)
    fd = os.open(env_dir / "extravars", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


# Runs first in ansible's process, then becomes ansible-playbook: a controller killed
# with SIGKILL takes ansible with it (SIGTERM: ansible stops its workers), instead of
# leaving it blocked on the controller's closed pty for ever.
_DIE_WITH_CONTROLLER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('fleetperf: the controller ended before ansible started')\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def ansible_run(
    private: Path,
    inventory: Path,
    forks: int,
    *,
    playbook: str | None = None,
    extravars: dict[str, Any] | None = None,
    event_handler: Callable[[dict[str, Any]], bool] | None = None,
    cancel_callback: Callable[[], bool] | None = None,
    **options: Any,
) -> Runner:
    """ansible-runner, for every run of ansible the controller makes (playbooks, the Hosts
    screen's ad-hoc modules: ``options`` are RunnerConfig's, such as module, limit).

    Runner's classes rather than ``ansible_runner.run``: that copies the controller's whole
    environment into the process and into the ``command`` artifact; here both get only
    ``ansible_env()`` and what runner itself needs. Extra vars go in as unsafe text. The
    event handler decides that no job_events are kept. ansible dies with the thread that
    started it."""
    private.mkdir(parents=True, exist_ok=True)
    if extravars:
        _write_extravars(private, extravars)
    config = RunnerConfig(
        private_data_dir=str(private),
        project_dir=str(REPO_ROOT),
        playbook=playbook,
        inventory=str(inventory),
        envvars=ansible_env(),
        forks=forks,
        quiet=True,
        **options,
    )
    config.prepare()  # seeds config.env with os.environ, then ours, then runner's settings
    ours = ansible_env()
    config.env = {
        **{k: v for k, v in config.env.items() if k in _RUNNER_KEEP},
        **ours,
        # Runner's callback alone: never a plugin directory from the controller's shell.
        "ANSIBLE_CALLBACK_PLUGINS": get_callback_dir(),
    }
    if sys.platform == "linux":
        config.command = [
            sys.executable,
            "-c",
            _DIE_WITH_CONTROLLER,
            str(os.getpid()),
            *config.command,
        ]
    runner = Runner(
        config,
        event_handler=event_handler or (lambda _event: False),
        cancel_callback=cancel_callback or (lambda: False),
    )
    runner.run()
    return runner
