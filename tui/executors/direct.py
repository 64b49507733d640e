"""The direct executor: a process run on this machine alone, without ansible-playbook. It
runs the host-side code of run.yml's modules (playbooks/module_utils: preflight, launch,
poll and stop, fleetperf_*_step.py and fleetperf_process.py) in the controller's own process,
in run.yml's order, and hands the tracker the steps the play's tasks would have given
it, so the run's record is the same (docs/executors.md, "The direct path").

A run goes this way when its one host is local (``ansible_connection: local``), runs
processes (``fleetperf_executor: process``), becomes no one, and every host var the run
needs is plain or renders from the controller's vars alone (the default inventory,
inventory/local.yml); any other run goes through the play. ``FLEETPERF_DIRECT=0`` sends
every run through the play. Cleanup after a dead controller, and a stop the engine asks
for, still run playbooks/stop.yml: the files on the host are the same either way."""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tui.core.errors import UsageError
from tui.core.events import LAUNCH_ACTION, PREFLIGHT_ACTION, TAIL_ACTION
from tui.executors.ansiblerun import PLAYBOOKS, ansible_env
from tui.executors.base import Launch, Outcome, Started
from tui.executors.steps import Step, StepState
from tui.executors.stop import StoppedByPlaybook
from tui.executors.tracker import HAND_BACK, PREFLIGHT_PLAY, Tracker, conclude, prepare

# An internal error's traceback: to stderr where no front end took the logger (logging's
# last resort), to the app's log file in the app (tui/app/__init__.py).
_LOG = logging.getLogger(__name__)
SETTING = "FLEETPERF_DIRECT"  # "0": every run through the play; "1" (the default): direct
_PACKAGE = "fleetperf_hostside"  # playbooks/module_utils, as a package of its own here
_LOCAL = ("local", "ansible.builtin.local")  # the connections that mean this machine
# The host vars a direct run reads: the ones it cannot go without, then the optional ones.
_REQUIRED = ("fleetperf_run_root", "fleetperf_data_root", "fleetperf_repo_dir", "fleetperf_python")
_OPTIONAL = (
    "fleetperf_workload_env",
    "fleetperf_min_free_gib",
    "fleetperf_master_port",
    "fleetperf_addr",
    "ansible_host",
)


# run.yml's tasks in order, and what the direct path does for each: a test reads the
# playbook and fails while a task there is missing here, or in another order, so a change
# to the playbook says what it means for the direct path (tests/unit/test_direct_steps.py).
RUN_STEPS: tuple[tuple[str, str], ...] = (
    ("Name each host's run's vars", "nothing: Launch.extravars() names them"),
    ("Check the controller's extra vars", "declared(): checked as they are made"),
    ("Check the host and take its lease", "preflight_step.preflight (no image: a process run)"),
    ("Hand back the lease of a host whose run another host was refused", "nothing: one host"),
    ("Start the workload", "fleetperf_process.launch"),
    ("Poll events", "poll_step.poll, until finished, timed out or stalled; failed: ended_badly"),
    ("Hand back a host with nothing left to do", "the tracker takes the last poll's done"),
    ("Fail a host that could not be polled", "nothing: this machine is reached"),
    ("Stop the other nodes when this one failed", "nothing: one host, no other"),
    ("Stop the workload", "stop_step.stop and release, unless the last poll released"),
    ("Hand the host back", "the HAND_BACK step"),
)


def enabled() -> bool:
    """Whether runs on this machine go direct (FLEETPERF_DIRECT); UsageError for a value
    other than 0 or 1."""
    raw = os.environ.get(SETTING, "1")
    if raw not in ("0", "1"):
        raise UsageError(f"{SETTING}={raw!r}: expected 0 (every run through the play) or 1")
    return raw == "1"


def hostside(name: str) -> ModuleType:
    """playbooks/module_utils/``name``.py, loaded once as part of a package of its own (its
    modules import each other relatively, as Ansible's module_utils)."""
    if _PACKAGE not in sys.modules:
        spec = importlib.machinery.ModuleSpec(_PACKAGE, None, is_package=True)
        spec.submodule_search_locations = [str(PLAYBOOKS / "module_utils")]
        sys.modules[_PACKAGE] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"{_PACKAGE}.{name}")


_JINJA = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined)


def _templated(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _render(value: Any, context: dict[str, Any]) -> Any:
    """A host var's value with its templates rendered from ``context``; a dict's values
    too. jinja2.TemplateError where it names what the context lacks (or a filter only
    Ansible has)."""
    if isinstance(value, dict):
        return {k: _render(v, context) for k, v in value.items()}
    if _templated(value):
        return _JINJA.from_string(value).render(context)
    return value


def local_vars(
    host: str, hostvars: dict[str, Any], inventory: Path, controller: dict[str, str]
) -> dict[str, Any] | None:
    """The vars a direct run on ``host`` needs, rendered, or None where the run must go
    through the play: not local, becomes someone, or a var that only a play can render."""
    if hostvars.get("ansible_connection") not in _LOCAL or hostvars.get("ansible_become"):
        return None
    plain = {k: v for k, v in hostvars.items() if not _templated(v)}
    # What a template may name: the host's plain vars, the controller's, and the magic vars
    # of Ansible's that have one meaning here.
    context = {
        **plain,
        **controller,
        "inventory_hostname": host,
        "inventory_dir": str(inventory.resolve().parent),
        "ansible_playbook_python": sys.executable,
    }
    try:
        found = {k: _render(hostvars[k], context) for k in _REQUIRED + _OPTIONAL if k in hostvars}
    except jinja2.TemplateError:
        return None
    env = found.get("fleetperf_workload_env", {})
    env_ok = isinstance(env, dict) and all(isinstance(v, str | int | float) for v in env.values())
    if not env_ok or not all(isinstance(found.get(k), str) and found[k] for k in _REQUIRED):
        return None
    return found


@dataclass
class _Run:
    launch: Launch
    tracker: Tracker
    cancel: threading.Event

    @property
    def host(self) -> str:
        return self.launch.hosts[0]

    @property
    def run_root(self) -> str:
        return str((self.launch.local or {})["fleetperf_run_root"])

    @property
    def run_dir(self) -> str:
        return f"{self.run_root}/{self.launch.run_id}"

    @property
    def lease(self) -> str:
        return f"{self.run_root}/fleetperf.lease"


class Direct(StoppedByPlaybook):
    """Runs each run on its own thread in this process: run.yml's tasks for one local host,
    as plain calls of the modules' own functions."""

    def __init__(self, runs: list[Started]) -> None:
        self._runs = {
            launch.run_id: _Run(launch, prepare(launch, on_event), cancel)
            for launch, on_event, cancel in runs
        }

    def run(self) -> None:
        threads = [
            threading.Thread(target=self._run, args=(r,), daemon=True, name=f"direct-{run_id}")
            for run_id, r in self._runs.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def outcome(self, run_id: str) -> Outcome:
        r = self._runs[run_id]
        r.tracker.ended.wait()
        ok = not r.tracker.play_failed
        return conclude(
            r.launch,
            r.tracker,
            cancelled=r.cancel.is_set(),
            rc=0 if ok else 1,
            runner_status="successful" if ok else "failed",
        )

    def discard(self, run_id: str) -> None:
        shutil.rmtree(self._runs[run_id].launch.run_dir, ignore_errors=True)

    def _run(self, r: _Run) -> None:
        """Preflight; then launch, poll, check the end; always stop what still runs and
        hand the host back (run.yml's blocks)."""
        launch, tracker, host = r.launch, r.tracker, r.host
        extra, local = launch.extravars(), launch.local or {}
        preflight, stop = hostside("fleetperf_preflight_step"), hostside("fleetperf_stop_step")
        refused = hostside("fleetperf_refused").Refused

        def event(state: StepState, action: str, res: dict[str, Any], **names: str) -> None:
            """The step that ran ``action`` (run.yml's ``names``: task, play)."""
            tracker.step(Step(host, action, state, res, **names))

        try:
            try:
                ready = preflight.preflight(_preflight_params(host, extra, local), r.cancel.is_set)
            except refused as exc:
                res = {"failed": True, "msg": str(exc), **exc.fields}
                event("failed", PREFLIGHT_ACTION, res, play=PREFLIGHT_PLAY)
                return
            event("ok", PREFLIGHT_ACTION, ready, play=PREFLIGHT_PLAY)
            tracker.host_dirs.setdefault(host, Path(r.run_dir))  # its files: copied at the end
            released = False
            try:
                released = self._work(r, extra, local, ready, event)
            finally:
                if not released:
                    stop.stop(r.run_dir, stop.STOP_GRACE_S, None)
                    hostside("fleetperf_host").release(r.lease, launch.run_id)
            event("ok", "debug", {}, task=HAND_BACK)
        except Exception as exc:  # a bug: the run fails with it (a launched workload: stopped)
            _LOG.exception("internal error")
            event("failed", "", {"msg": f"internal error: {exc!r}"})
        finally:
            tracker.ended.set()

    def _work(
        self,
        r: _Run,
        extra: dict[str, Any],
        local: dict[str, Any],
        ready: dict[str, Any],
        event: Callable[..., None],
    ) -> bool:
        """Launch, poll to the end, check how it ended; whether the last poll released the
        lease (the workload ended by itself, nothing left to stop)."""
        poll, host = hostside("fleetperf_poll_step"), r.host
        argv, env = _workload(extra, local, r.run_dir, ready)
        chdir = str(local["fleetperf_repo_dir"])
        pid = hostside("fleetperf_process").launch(r.run_dir, argv, chdir, env, ansible_env())
        # The supervisor is this process's child here (the module's would be orphaned at
        # once): reaped as it ends, so it is never left a zombie that looks alive, and its
        # end wakes the poll at once instead of at its next look at the files.
        ended = threading.Event()
        reaper = threading.Thread(target=_reap, args=(pid, ended), daemon=True, name=f"reap-{pid}")
        reaper.start()
        event("ok", LAUNCH_ACTION, {"changed": True, "pid": pid})
        params = {
            "run_dir": r.run_dir,
            "lines": host not in extra["fleetperf_follow"],
            "wait": extra["fleetperf_poll_s"],
            "min_gap": 0.5,
            "max_bytes": poll.MAX_POLL_BYTES,
            "timeout_s": extra["fleetperf_timeout_s"],
            "stall_s": extra["fleetperf_stall_s"],
            "lease": r.lease,
            "executor": "process",
            "docker_host": "",
            "host": host,
            "rank": 0,
        }
        while True:
            began = time.thread_time()
            res = poll.poll(
                params,
                False,
                r.cancel.is_set,
                lambda b=began: time.thread_time() - b,
                partial(_tick, ended),
            )
            if r.cancel.is_set():
                return False  # aborted: the stop follows
            if res["finished"] or res["timed_out"] or res["stalled"]:
                break
            event("retry", TAIL_ACTION, res)
        if why := poll.ended_badly(res, params):  # run.yml's poll fails the host itself
            event("failed", TAIL_ACTION, {**res, "msg": why})
        else:
            event("ok", TAIL_ACTION, res)
        return bool(res["released"])


def _tick(ended: threading.Event, seconds: float) -> None:
    """The poll's pause between two looks at the files: cut short as the supervisor ends;
    after that (a supervisor killed before it wrote exit_code), a plain pause."""
    if ended.is_set():
        time.sleep(seconds)
    else:
        ended.wait(seconds)


def _reap(pid: int, ended: threading.Event) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    ended.set()


def _preflight_params(host: str, extra: dict[str, Any], local: dict[str, Any]) -> dict[str, Any]:
    """fleetperf_preflight's options as run.yml gives them, its defaults applied."""
    single = extra["fleetperf_nnodes"] == 1 and extra["fleetperf_nproc_per_node"] == 1
    return {
        "host": host,
        "run_root": local["fleetperf_run_root"],
        "run_id": extra["fleetperf_run_id"],
        "case": extra["fleetperf_case"],
        "data_dir": f"{local['fleetperf_data_root']}/{extra['fleetperf_case']}",
        "requires": extra["fleetperf_requires"],
        "config": extra["fleetperf_config"],
        "min_free_gib": float(local.get("fleetperf_min_free_gib", 1)),
        "master_port": None if single else int(local.get("fleetperf_master_port", 0)),
        "controller": extra["fleetperf_controller"],
        "lease_wait_s": float(extra["fleetperf_lease_wait_s"]),
        "lease_stale_s": hostside("fleetperf_preflight_step").LEASE_STALE_S,
        "data_manifest": extra["fleetperf_data_manifest"],
        "python": local["fleetperf_python"],
        "imports": extra["fleetperf_imports"],
        "executor": "process",
        "docker_host": "",
    }


def _workload(
    extra: dict[str, Any], local: dict[str, Any], run_dir: str, ready: dict[str, Any]
) -> tuple[list[str], dict[str, str]]:
    """fleetperf_launch's argv and env as run.yml builds them for a process host."""
    repo, case = str(local["fleetperf_repo_dir"]), extra["fleetperf_case"]
    data_dir = f"{local['fleetperf_data_root']}/{case}"
    path = extra["fleetperf_case_path"]
    case_dir = path if os.path.isabs(path) else f"{repo}/{path}"
    args = [f"{case_dir}/{extra['fleetperf_entrypoint']}", "--config", f"{run_dir}/config.json"]
    args += ["--data-dir", data_dir, "--run-dir", run_dir]
    nnodes, nproc = extra["fleetperf_nnodes"], extra["fleetperf_nproc_per_node"]
    torchrun = []
    if not (nnodes == 1 and nproc == 1):
        addr = local.get("fleetperf_addr", local.get("ansible_host", "127.0.0.1"))
        torchrun = [
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            "--node_rank=0",
            f"--nproc_per_node={nproc}",
            f"--master_addr={addr}",
            f"--master_port={ready['master_port']}",
        ]
    config_env = {
        k: str(v).replace("{data_dir}", data_dir) for k, v in extra["fleetperf_config_env"].items()
    }
    env = {
        **config_env,
        **{str(k): str(v) for k, v in local.get("fleetperf_workload_env", {}).items()},
        "PYTHONPATH": f"{repo}/cases",
        "PYTHONUNBUFFERED": "1",
    }
    return [str(local["fleetperf_python"]), *torchrun, *args], env
