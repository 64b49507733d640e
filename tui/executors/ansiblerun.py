"""Running ansible from the controller: an allow-listed environment, host keys checked,
extra vars as unsafe text, ansible dying with the controller, leftovers of a dead one; and
ansible-runner's events translated into the engine's steps (tui/executors/steps.py)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tui.core import safefile
from tui.core.paths import REPO_ROOT
from tui.core.stream import SSH_SAFETY
from tui.core.text import clean
from tui.executors.steps import Step, StepState

if TYPE_CHECKING:
    from ansible_runner import Runner

PLAYBOOKS = REPO_ROOT / "playbooks"

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


# ansible-runner's per-host task results, and the step state each is.
_STATES: dict[str, StepState] = {
    "runner_on_ok": "ok",
    "runner_retry": "retry",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


def task_action(data: dict[str, Any]) -> str:
    """The module a task ran, without its collection prefix (``ns.coll.fleetperf_tail``)."""
    action = data.get("resolved_action") or data.get("task_action") or ""
    return str(action).rsplit(".", 1)[-1]


def step_of(event: dict[str, Any]) -> Step | None:
    """An ansible-runner event as the step whose result it carries; None for the others
    (a play's or a task's start, stats). An unreachable host's ssh failure is explained."""
    state = _STATES.get(event.get("event", ""))
    data = event.get("event_data") or {}
    if state is None:
        return None
    host = clean(str(data.get("host") or data.get("remote_addr") or ""))
    res = dict(data.get("res") or {})
    if state == "unreachable" and isinstance(res.get("msg"), str):
        res["msg"] = explain_unreachable(host, res["msg"])
    return Step(
        host,
        task_action(data),
        state,
        res,
        task=str(data.get("task") or ""),
        play=str(data.get("play") or ""),
        role=str(data.get("role") or ""),
        ignored=bool(data.get("ignore_errors")),
    )


def on_steps(
    handle: Callable[[Step], None], stats: Callable[[dict[str, Any]], None] | None = None
) -> Callable[[dict[str, Any]], bool]:
    """An ansible-runner event handler: each task's result to ``handle`` as a step, the
    play's per-host stats to ``stats``; no job_events kept (they would hold module
    arguments)."""

    def handler(event: dict[str, Any]) -> bool:
        if step := step_of(event):
            handle(step)
        elif stats and event.get("event") == "playbook_on_stats":
            stats(event.get("event_data") or {})
        return False

    return handler


# In the run dir of a run whose play ran from another run's dir (several runs, one play):
# the path of that play's private dir.
PLAY_FILE = "ansible-play"


def _ansible_of(run_dir: Path) -> list[int]:
    """Processes still running ansible for the run in ``run_dir``: their command line names
    one of the run's extra vars files (``ansible_run``; a play shared with other runs:
    the one ``PLAY_FILE`` names), which no other play's can."""
    privates = [p for p in run_dir.glob("ansible-*") if p.is_dir() and not p.is_symlink()]
    shared = run_dir / PLAY_FILE
    if shared.is_file() and not shared.is_symlink():
        privates.append(Path(shared.read_text().strip()))
    marks = {f"@{private}/env/extravars".encode() for private in privates}
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
    safefile.make_dirs(env_dir)
    text = yaml.dump(_Unsafe(extravars), Dumper=_UnsafeDumper, sort_keys=False, allow_unicode=True)
    safefile.write_text(env_dir / "extravars", text)


# Starts ansible-playbook and ends it, and any worker it orphans, when the controller dies
# (even by SIGKILL) instead of leaving it blocked on the controller's closed pty for ever.
_GUARD = Path(__file__).with_name("ansible_guard.py")


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
    # Here, not at the top: a direct run (tui/executors/direct.py) never needs them.
    from ansible_runner import Runner, RunnerConfig
    from ansible_runner.utils import get_callback_dir

    safefile.make_dirs(private)
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
            str(_GUARD),
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


def run_playbook(
    private: Path,
    playbook: str,
    inventory: Path,
    extravars: dict[str, Any],
    hosts: int,
    event_handler: Callable[[dict[str, Any]], bool] | None = None,
    cancel_callback: Callable[[], bool] | None = None,
) -> Runner:
    """One of playbooks/ for a run's ``hosts`` (a fork each), its artifacts in ``private``."""
    return ansible_run(
        private,
        inventory,
        forks=max(hosts, 5),
        playbook=str(PLAYBOOKS / playbook),
        extravars=extravars,
        event_handler=event_handler,
        cancel_callback=cancel_callback,
    )
