"""Case runs through ansible: their launch, the event stream folded into each run's
outcome, their stop and cleanup (tui/engine/inventory.py chooses the hosts,
tui/executors/ansiblerun.py runs ansible). The runs that start together share one play of
run.yml (``Play``); a Slurm run has its own slurm.yml (``run_slurm``)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import stat
import sys
import tarfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from ansible_runner import Runner
from harness.staging import DATA_MANIFEST

from tui.catalog import caseimports, images
from tui.catalog.catalog import RunSpec
from tui.core import liveness, safefile
from tui.core.errors import UsageError
from tui.core.events import (
    PREFLIGHT_ACTION,
    TAIL_ACTION,
    CaseResult,
    Event,
    HostState,
    RunStatus,
    WorkloadError,
    as_dict,
    blame,
    from_runner,
    parse_line,
    task_action,
)
from tui.core.paths import REPO_ROOT, UnsafeName, host_path
from tui.core.stream import Follower, Reach, capped_lines
from tui.executors.ansiblerun import (
    PLAY_FILE,
    PLAYBOOKS,
    ansible_run,
    explain_unreachable,
    kill_leftover_ansible,
)
from tui.executors.extravars import declared, spec

# The Slurm executor's modules (playbooks/slurm.yml) whose results the tracker reads.
SLURM_CHECK, SLURM_SUBMIT, SLURM_POLL = (
    "fleetperf_slurm_check",
    "fleetperf_slurm_submit",
    "fleetperf_slurm_poll",
)

IMAGE_ACTION = "fleetperf_image"  # run.yml's image check: the id that the launch runs
PREFLIGHT_PLAY = "Preflight"  # run.yml's first play: a host failing there is out of the play
HAND_BACK = "Hand the host back"  # run.yml's last task on a host: the play is done with it
CANCEL_SETTLE_S = 0.3  # a cancel seen this long: the batch's other cancels have come too
POLL_S = 30.0  # longest hold of one poll while nothing happens (it returns on new lines)
DRAIN_S = 5.0  # longest wait at a host's end for its follower to hand on the last lines
# What a run leaves in a host's run directory that the controller keeps.
_MIB = 1 << 20
# The most of each host file the controller keeps, and which end (issue 26 point 4: one
# host's 400 MB events file without a newline cost the controller 800 MB of memory and
# was copied whole into results/runs). The events keep their head: the follower's byte
# count still points into the copy, so recover() goes on where it stopped. The logs keep
# their tail, where the error that ended a run is. The settings (environment variables,
# MiB) change the defaults: name -> (setting, default bytes, the end kept).
HOST_FILE_LIMITS: dict[str, tuple[str | None, int, str]] = {
    "events.jsonl": ("FLEETPERF_MAX_EVENTS_MIB", 256 * _MIB, "head"),
    "stdout.log": ("FLEETPERF_MAX_LOG_MIB", 64 * _MIB, "tail"),
    "stderr.log": ("FLEETPERF_MAX_LOG_MIB", 64 * _MIB, "tail"),
    "exit_code": (None, 64, "head"),
    "config.json": (None, _MIB, "head"),
}
HOST_FILES = tuple(HOST_FILE_LIMITS)
MAX_SETTING_MIB = 1 << 16  # 64 GiB: past it, a setting is a typo
# The pax header of a member a host cut to its limit: the file's whole size
# (playbooks/module_utils/fleetperf_host.py CUT_HEADER).
CUT_HEADER = "FLEETPERF.size"
HOST_ARCHIVE = "files.tar"  # what a host's files are fetched in (playbooks/tasks/collect.yml)


def new_run_id(case: str) -> str:
    """STAMP-CASE-TOKEN, TOKEN 16 hex digits: 64 random bits, so that no two controllers
    on one results directory draw the same id (four digits collided within one 32-run batch;
    the store refuses the rare repeat, tui/results/store.py). Tables show the token's first
    digits."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{case}-{secrets.token_hex(8)}"


def host_file_limits() -> dict[str, dict[str, Any]]:
    """HOST_FILE_LIMITS with the settings applied: name -> {"bytes", "keep"}, as the
    collect modules take them (fleetperf_host_file_limits); UsageError for a bad setting."""
    out = {}
    for name, (setting, default, keep) in HOST_FILE_LIMITS.items():
        raw = os.environ.get(setting) if setting else None
        if raw is not None and not (
            re.fullmatch(r"[0-9]{1,6}", raw) and 0 < int(raw) <= MAX_SETTING_MIB
        ):
            raise UsageError(
                f"{setting}={raw!r}: expected a whole number of MiB, 1 to {MAX_SETTING_MIB}"
            )
        out[name] = {"bytes": default if raw is None else int(raw) * _MIB, "keep": keep}
    return out


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
    executor: str = "process"  # the hosts' fleetperf_executor; slurm: playbooks/slurm.yml
    # Hosts whose events file the controller follows itself (tui/core/stream.py), and how.
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
    started: str = ""
    finished: str = ""
    # From the hosts' preflights: the highest load per CPU among them, and whether the
    # data was synthetic (True if on any host; None where no host's data says).
    load_per_cpu: float | None = None
    synthetic_data: bool | None = None
    slurm: dict[str, Any] | None = None  # job_id, partition, nodes, state (executor slurm)
    # Executor docker: the id of the image each host's container ran (its preflight checked it).
    image_ids: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a host sent that was refused


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Tracker:
    """Folds the event stream into what the outcome needs, and keeps a log of it. Events
    come from ansible-runner's thread and from the followers' threads."""

    def __init__(self, launch: Launch, on_event: Callable[[Event], None]) -> None:
        self.run_id = launch.run_id
        log = safefile.create(launch.run_dir / "events.jsonl")  # the run dir is new
        self.log = os.fdopen(log, "w", encoding="utf-8")
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
        self.fetch_dir = launch.run_dir / "hosts"  # HOST/NAME: what the cleanup brings back
        self.refused: dict[str, str] = {}  # a name from a host -> why it was refused
        self.image_ids: dict[str, str] = {}  # host -> the image id its container ran
        self.started_hosts: set[str] = set()  # hosts whose workload was launched
        self.play_failed = False  # a task failed (not ignored) on a host of this run
        self.handed_back: set[str] = set()  # hosts the play is done with (run.yml)
        self.ended = threading.Event()  # the play is done with every host of this run
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
        self._play_part(raw.get("event", ""), data, host)
        return False  # ansible-runner keeps no job_events: they would hold module arguments

    def _play_part(self, kind: str, data: dict[str, Any], host: str) -> None:
        """Whether the play failed on this run's hosts, and whether it is done with them:
        a host is done after run.yml's last task, or once it failed in the preflight play
        (no later play runs on it). A failure that ansible does not ignore fails the run,
        as it would fail ansible-playbook; an unreachable poll fails the next task anyway."""
        failed = kind == "runner_on_failed" and not data.get("ignore_errors")
        if failed or kind == "runner_on_unreachable":
            self.play_failed = True
            if data.get("play") == PREFLIGHT_PLAY:
                self.handed_back.add(host)
        elif kind == "runner_on_ok" and data.get("task") == HAND_BACK:
            self.handed_back.add(host)
        if self.handed_back >= self.phases.keys():
            self.ended.set()

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
        state, reason = res.get("state"), res.get("reason") or ""
        nodes = self._node_names(login, res.get("nodes"))
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

    def _node_names(self, login: str, names: Any) -> list[str]:
        """The node names of a Slurm poll that may name a path here (each node's files,
        its follower); the others refused, noted once each."""
        usable = []
        for name in names if isinstance(names, list) else []:
            try:
                host_path(self.fetch_dir, name)
            except UnsafeName as exc:
                self.refused.setdefault(ascii(name)[:80], f"host {login}: Slurm node {exc}")
                continue
            usable.append(name)
        return usable

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
                for head, _, _ in capped_lines(f):  # at most a line's cap held at once
                    line = head.decode("utf-8", "replace").strip()
                    if line and (ev := parse_line(self.run_id, host, line)):
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
            self.started_hosts.add(ev.host)
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


def _copy_host_files(host_dirs: dict[str, Path], fetch_dir: Path) -> list[str]:
    """What the play's fetch does for other hosts, for hosts that share our files: regular
    files only, never through a link (the workload writes its run dir;
    playbooks/module_utils/fleetperf_host.py does the same on hosts), each within its
    limit. The files cut, as notes."""
    limits, notes = host_file_limits(), []
    for host, src in host_dirs.items():
        dest = fetch_dir / host
        safefile.make_dirs(dest)
        for name in HOST_FILES:
            try:  # O_NONBLOCK: a FIFO opens at once, and is then left out as not regular
                fd = os.open(src / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:  # missing, or a link (ELOOP)
                continue
            with open(fd, "rb") as f:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode):
                    with safefile.replacing(dest / name) as out:
                        kept = _copy_limited(f, out, st.st_size, limits[name])
                    notes += _cut_note(host, name, st.st_size, kept, limits[name])
    return notes


def unpack_host_files(fetch_dir: Path, *, nodes: bool = False) -> list[str]:
    """Each host's fetched HOST_ARCHIVE unpacked, then removed: regular files named in
    HOST_FILES only (the host made it from its run dir, which its workload writes), 0600
    whatever mode the host gave them, replacing a link rather than following. A process
    host's go beside it; with ``nodes``, a Slurm login host's NODE/NAME members go to
    fetch_dir/NODE (playbooks/tasks/slurm_stop.yml). Each within its limit, whatever the
    host sent. What was refused or cut (here or by the host), as notes."""
    refused: dict[str, str] = {}
    limits, cut = host_file_limits(), []
    for archive in fetch_dir.glob(f"*/{HOST_ARCHIVE}"):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                dest = _member_dest(fetch_dir, archive.parent, member.name, nodes, refused)
                if dest and member.isreg() and (f := tar.extractfile(member)) is not None:
                    limit = limits[dest.name]
                    with f, safefile.replacing(dest) as out:
                        kept = _copy_limited(f, out, member.size, limit)
                    size = _whole_size(member)
                    cut += _cut_note(dest.parent.name, dest.name, size, kept, limit)
        archive.unlink()
    return [*refused.values(), *cut]


def _copy_limited(src: BinaryIO, out: BinaryIO, size: int, limit: dict[str, Any]) -> int:
    """Of ``src`` (``size`` bytes), the head or tail its limit keeps, into ``out``, a MiB
    at a time; the bytes copied."""
    kept = min(size, limit["bytes"])
    src.seek(size - kept if limit["keep"] == "tail" else 0)
    left = kept
    while left and (chunk := src.read(min(left, _MIB))):
        out.write(chunk)
        left -= len(chunk)
    return kept - left


def _whole_size(member: tarfile.TarInfo) -> int:
    """A member's size before its host cut it (its CUT_HEADER, if a plausible number)."""
    said = member.pax_headers.get(CUT_HEADER, "")
    if re.fullmatch(r"[0-9]{1,19}", said) and int(said) > member.size:
        return int(said)
    return member.size


def _cut_note(host: str, name: str, size: int, kept: int, limit: dict[str, Any]) -> list[str]:
    """The record's note for a host file cut (``size`` bytes, ``kept`` of them) to its
    limit, here or by its host; none for one kept whole."""
    if kept >= size:
        return []
    setting = HOST_FILE_LIMITS[name][0]
    why = f" ({setting})" if setting else ""
    return [
        f"host {host}: {name} was {size} bytes; kept its {limit['keep']} {kept} bytes, the"
        f" limit{why}"
    ]


def _member_dest(
    fetch_dir: Path, host_dir: Path, name: str, nodes: bool, refused: dict[str, str]
) -> Path | None:
    """Where a member of a host's archive goes, if anywhere: HOST/NAME, or with ``nodes``
    NODE/NAME, the node's name from the host through paths.host_path (a refusal noted in
    ``refused``, once a name)."""
    node, _, file = name.rpartition("/")
    if file not in HOST_FILES or bool(node) != nodes:
        return None
    if not nodes:
        return host_dir / file
    try:
        node_dir = host_path(fetch_dir, node)
    except UnsafeName as exc:
        refused.setdefault(ascii(node)[:80], f"host {host_dir.name}: Slurm node {exc}")
        return None
    safefile.make_dirs(node_dir)
    return node_dir / file


def _synthetic(per_host: list[bool | None]) -> bool | None:
    """Synthetic if any host's data was; real only if every host's data says so."""
    if True in per_host:
        return True
    return False if per_host and all(v is False for v in per_host) else None


def _prepare(launch: Launch, on_event: Callable[[Event], None]) -> _Tracker:
    """The run's directory with its config.json, and its tracker, its hosts in preflight."""
    safefile.make_dirs(launch.run_dir, exist_ok=False)
    config = json.dumps(launch.config_json(), indent=2) + "\n"
    safefile.write_text(launch.run_dir / "config.json", config)
    tracker = _Tracker(launch, on_event)
    for host in launch.hosts:
        tracker.emit(HostState(launch.run_id, host, "preflight"))
    return tracker


def _conclude(
    launch: Launch, tracker: _Tracker, *, cancelled: bool, rc: int, runner_status: str, started: str
) -> Outcome:
    """After the play is done with the run's hosts: its followers closed, the files of hosts
    that share ours copied, the lines a follower missed recovered; its outcome."""
    try:
        tracker.close_followers()
        copied = _copy_host_files(tracker.host_dirs, launch.run_dir / "hosts")
        unpacked = unpack_host_files(launch.run_dir / "hosts", nodes=launch.executor == "slurm")
        tracker.recover(launch.run_dir / "hosts")
        tracker.stopped()
    finally:
        tracker.close_followers()
        tracker.log.close()
    seen = tracker.hosts_seen.values()
    loads = [v["load_per_cpu"] for v in seen if v["load_per_cpu"] is not None]
    status, error = verdict(
        cancelled=cancelled,
        bad_input=tracker.bad_input,
        launched=tracker.launched,
        rc=rc,
        runner_status=runner_status,
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
        notes=list(dict.fromkeys([*tracker.refused.values(), *unpacked, *copied])),
    )


def run_slurm(
    launch: Launch,
    on_event: Callable[[Event], None],
    cancel: threading.Event | None = None,
) -> Outcome:
    """Run one case as a Slurm job (playbooks/slurm.yml); blocks until it ends, is
    cancelled, or fails."""
    cancel = cancel or threading.Event()
    tracker = _prepare(launch, on_event)
    started = _now()
    try:
        runner = _runner(
            launch.run_dir / "ansible-slurm",
            "slurm.yml",
            launch.inventory,
            launch.extravars(),
            len(launch.hosts),
            event_handler=tracker,
            cancel_callback=cancel.is_set,
        )
        if cancel.is_set():  # Ctrl-C may also have stopped ansible-playbook before its cleanup
            stop([launch])
    except BaseException:
        tracker.close_followers()
        tracker.log.close()
        raise
    return _conclude(
        launch,
        tracker,
        cancelled=cancel.is_set(),
        rc=runner.rc,
        runner_status=runner.status,
        started=started,
    )


@dataclass
class _InPlay:
    """One run of a play: what it needs, and how far its cancel has gone."""

    launch: Launch
    tracker: _Tracker
    cancel: threading.Event
    started: str
    cancel_seen: float | None = None  # monotonic time its cancel was first seen
    stopped: frozenset[str] = frozenset()  # its hosts stop.yml ran on after the cancel


class Play:
    """playbooks/run.yml once for the runs that start together (their hosts disjoint): one
    ansible-playbook, its start and its inventory paid once, each host doing its own run's
    work (fleetperf_runs: host -> its run's vars). ansible-runner's events go to the
    tracker of the host's run. A run ends when the play is done with each of its hosts,
    which may be long before the play ends: ``outcome`` returns then.

    Cancelling one run stops only its hosts (stop.yml on them, again for a host launched
    after that); the play carries on and cleans up after them. Once every run still in the
    play is cancelled (Ctrl-C), ansible-playbook itself is stopped, then one stop.yml
    stops all their hosts."""

    WATCH_S = 0.1  # how often cancels are looked at

    def __init__(self, runs: list[tuple[Launch, Callable[[Event], None], threading.Event]]):
        self._runs = {
            launch.run_id: _InPlay(launch, _prepare(launch, on_event), cancel, _now())
            for launch, on_event, cancel in runs
        }
        self._of_host = {h: r.tracker for r in self._runs.values() for h in r.launch.hosts}
        self._kill = threading.Event()  # every run still in the play was cancelled
        self._over = threading.Event()
        # The play's artifacts go in its first run's directory.
        self._holder = runs[0][0].run_id if runs else ""
        self._discard: list[Path] = []  # refused runs' dirs, removed when the play ends
        self._lock = threading.Lock()
        self.rc, self.status = 1, "failed"  # ansible-playbook's, once it ended

    def __call__(self, raw: dict[str, Any]) -> bool:
        host = (raw.get("event_data") or {}).get("host", "")
        if tracker := self._of_host.get(host):
            tracker(raw)
        return False  # ansible-runner keeps no job_events: they would hold module arguments

    def extravars(self) -> dict[str, Any]:
        """run.yml's one extra var: each host -> its run's vars (one dict per run, which
        the extra vars file writes once, YAML aliases for its other hosts)."""
        runs: dict[str, Any] = {}
        for r in self._runs.values():
            values = r.launch.extravars()
            runs.update(dict.fromkeys(r.launch.hosts, values))
        return declared("plays", {"fleetperf_runs": runs})

    def run(self) -> None:
        """Run the play to its end (each run's ``outcome`` may return before)."""
        first, *others = (r.launch for r in self._runs.values())
        private = first.run_dir / "ansible-run"
        for launch in others:  # where leftovers of the play are found (tui/executors/ansiblerun.py)
            safefile.write_text(launch.run_dir / PLAY_FILE, f"{private}\n")
        watcher = threading.Thread(target=self._watch, daemon=True, name="play-cancels")
        watcher.start()
        try:
            try:
                runner = _runner(
                    private,
                    "run.yml",
                    first.inventory,
                    self.extravars(),
                    len(self._of_host),
                    event_handler=self,
                    cancel_callback=self._kill.is_set,
                )
                self.rc, self.status = runner.rc, runner.status
            except Exception as exc:  # a bug: each run fails with it, its work is stopped
                traceback.print_exc()
                self.status = f"with an internal error: {exc!r}"
                self._kill.set()
            if self._kill.is_set():  # ansible-playbook was stopped, maybe before its cleanup
                stop([r.launch for r in self._runs.values() if not r.tracker.ended.is_set()])
        finally:
            self._over.set()
            watcher.join()
            for r in self._runs.values():
                r.tracker.ended.set()
            with self._lock:
                for run_dir in self._discard:
                    shutil.rmtree(run_dir, ignore_errors=True)

    def discard(self, run_id: str) -> None:
        """Remove a refused run's directory: at once, or, where it holds the play's
        artifacts, once ansible-playbook has ended."""
        run_dir = self._runs[run_id].launch.run_dir
        with self._lock:
            if run_id == self._holder and not self._over.is_set():
                self._discard.append(run_dir)
                return
        shutil.rmtree(run_dir, ignore_errors=True)

    def _watch(self) -> None:
        while not self._over.wait(self.WATCH_S):
            now = time.monotonic()
            live = [r for r in self._runs.values() if not r.tracker.ended.is_set()]
            for r in live:
                if r.cancel.is_set() and r.cancel_seen is None:
                    r.cancel_seen = now
            settled = [r for r in live if r.cancel_seen and now - r.cancel_seen >= CANCEL_SETTLE_S]
            if live and len(settled) == len(live):
                self._kill.set()
                return
            # Stop a cancelled run's hosts once launched (a host launched later: again).
            to_stop = [r for r in settled if r.tracker.started_hosts - r.stopped]
            for r in to_stop:
                r.stopped = frozenset(r.tracker.started_hosts)
            if to_stop:
                stop([r.launch for r in to_stop])

    def outcome(self, run_id: str) -> Outcome:
        """Block until the play is done with the run's hosts; the run's outcome."""
        r = self._runs[run_id]
        r.tracker.ended.wait()
        done = r.tracker.handed_back >= set(r.launch.hosts)
        # Handed back without a failure: the play went well for this run, whatever it did
        # on other runs' hosts; a host it never handed back fails the run with the play.
        ok = not r.tracker.play_failed and (done or (self._over.is_set() and self.rc == 0))
        return _conclude(
            r.launch,
            r.tracker,
            cancelled=r.cancel.is_set(),
            rc=0 if ok else 1,
            runner_status=self.status if self._over.is_set() else "failed",
            started=r.started,
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


def _stop_vars(values: dict[str, Any]) -> dict[str, Any]:
    """A run's vars as stop.yml takes them (the "stop" entry's)."""
    return declared("stop", {k: v for k, v in values.items() if k in spec("stop")})


def stop(launches: list[Launch]) -> None:
    """Stop these runs' workloads on all their hosts, in one play of playbooks/stop.yml;
    used after a cancel."""
    runs: dict[str, Any] = {}
    for launch in launches:
        runs.update(dict.fromkeys(launch.hosts, _stop_vars(launch.extravars())))
    if runs:
        extravars = declared("plays", {"fleetperf_runs": runs})
        first = launches[0]
        _runner(first.run_dir / "ansible-stop", "stop.yml", first.inventory, extravars, len(runs))


def stop_run(
    run_id: str,
    hosts: list[str],
    inventory: Path,
    results_dir: Path,
    data_root: Path,
    executor: str = "process",
) -> bool:
    """playbooks/stop.yml for a run this controller did not launch (cleanup after a
    controller died); True if it ran to the end. The files of a Slurm node whose name is
    refused are left out (the record was written before)."""
    run_dir = results_dir / "runs" / run_id
    kill_leftover_ansible(run_dir)
    values = _stop_vars(
        {
            "fleetperf_run_id": run_id,
            "fleetperf_hosts": hosts,
            "fleetperf_fetch_dir": str(run_dir / "hosts"),
            "fleetperf_host_files": list(HOST_FILES),
            "fleetperf_host_archive": HOST_ARCHIVE,
            "fleetperf_host_file_limits": host_file_limits(),
            **controller_vars(results_dir, data_root),
        }
    )
    extravars = declared("plays", {"fleetperf_runs": dict.fromkeys(hosts, values)})
    runner = _runner(run_dir / "ansible-cleanup", "stop.yml", inventory, extravars, len(hosts))
    unpack_host_files(run_dir / "hosts", nodes=executor == "slurm")
    return runner.rc == 0


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
