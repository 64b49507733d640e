"""Follow each host's ``events.jsonl`` with one long-lived reader instead of repeated polls.

A poll through Ansible starts an interpreter on the benchmarked host for every return; a
follower is one ``tail -F`` per host for the whole run (inotify: no CPU while nothing is
written), started here for a host that is this machine and over ``ssh`` for an ssh host.
Its lines reach the controller as they are written. Hosts reached some other way (another
connection plugin, connection settings that only a play can render) are polled by
``fleetperf_tail`` as before; the poll task still watches every host for its exit, a stall
or a time-out, and hands back a followed host's file size at the end so that nothing
written is missed. Lines a follower could not hand on (its ssh connection dropped) are read
from the host's file that the cleanup brings back (tui/executors/tracker.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from tui.core.events import MAX_LINE_BYTES

# Before any option of the inventory's, so that they win (ssh keeps an option's first
# value): the host's key must be known and match, and a host gone silent (a network
# partition) ends the connection after 30 s instead of hanging for hours.
SSH_SAFETY = (
    *("-o", "StrictHostKeyChecking=yes"),
    *("-o", "ServerAliveInterval=10"),
    *("-o", "ServerAliveCountMax=3"),
)
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the child before exec: end when the thread that started it ends, so a controller
    killed with SIGKILL leaves no follower behind (an ssh follower's remote tail then
    ends with its connection)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class Reach:
    """How the controller reaches a host's files: here (``ssh`` None) or over ssh."""

    ssh: tuple[str, ...] | None = None

    def argv(self, path: str) -> list[str]:
        tail = ["tail", "-c", "+1", "-F", "--", path]  # from the first byte, across re-creation
        if self.ssh is None:
            return tail
        # ssh hands the remote side one command line: each word is quoted for its shell.
        return [*self.ssh, "exec " + shlex.join(tail)]


def _plain(value: Any) -> str | None:
    """A connection setting as ssh takes it; None where a template would have to render it."""
    if value is None:
        return None
    text = str(value)
    return None if "{{" in text or "{%" in text else text


def reach(name: str, hostvars: dict[str, Any]) -> Reach | None:
    """How to follow a host's files, from its inventory variables; None: poll it instead."""
    connection = _plain(hostvars.get("ansible_connection", "ssh"))
    if connection in ("local", "ansible.builtin.local"):
        return Reach()
    if connection not in ("ssh", "ansible.builtin.ssh", "smart"):
        return None
    keys = {
        "host": ("ansible_host", "ansible_ssh_host"),
        "port": ("ansible_port", "ansible_ssh_port"),
        "user": ("ansible_user", "ansible_ssh_user"),
        "key": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
        "common": ("ansible_ssh_common_args",),
        "extra": ("ansible_ssh_extra_args",),
    }
    found: dict[str, str] = {}
    for what, names in keys.items():
        raw = next((hostvars[n] for n in names if hostvars.get(n) is not None), None)
        if raw is None:
            continue
        value = _plain(raw)
        if value is None:
            return None
        found[what] = value
    argv = ["ssh", "-T", "-o", "BatchMode=yes", *SSH_SAFETY]
    if control := _ansible_control_path(found.get("host", name), found, hostvars):
        # Over the connection Ansible keeps to the host where it is up: a new connection's
        # handshake per host (32 at once, on the controller's and the hosts' CPUs) made
        # the first lines of a batch's last hosts seconds late. Without it, ssh connects.
        argv += ["-o", "ControlMaster=no", "-o", f"ControlPath={control}"]
    if "port" in found:
        argv += ["-p", found["port"]]
    if "user" in found:
        argv += ["-l", found["user"]]
    if "key" in found:
        argv += ["-i", found["key"]]
    argv += shlex.split(found.get("common", "")) + shlex.split(found.get("extra", ""))
    return Reach(ssh=(*argv, "--", found.get("host", name)))


def _ansible_control_path(host: str, found: dict[str, str], hostvars: dict[str, Any]) -> str | None:
    """The socket of the connection Ansible's ssh plugin shares for this host
    (tui/executors/ansiblerun.py sets ControlPersist and no ControlPath, so the plugin's
    own: the first 10 hex digits of sha1("HOST-PORT-USER") in its control path directory);
    None where the inventory sets a path of its own or its directory is templated."""
    if "ansible_control_path" in hostvars:
        return None
    directory = _plain(hostvars.get("ansible_control_path_dir", "~/.ansible/cp"))
    if directory is None:
        return None
    user = found.get("user") or os.environ.get("ANSIBLE_REMOTE_USER")
    digest = hashlib.sha1(f"{host}-{found.get('port')}-{user}".encode()).hexdigest()
    return os.path.join(os.path.realpath(os.path.expanduser(directory)), digest[:10])


def capped_lines(stream: BinaryIO) -> Iterator[tuple[bytes, int, bool]]:
    """Each line of ``stream`` as (its head, its size in bytes, whether a newline ended it).
    Read MAX_LINE_BYTES + 1 at a time: of a longer line only that head is kept and handed
    on (the parser drops it as too long, counted), never all of it, so a reader holds at
    most that much of a line whatever a workload writes."""
    head, size = b"", 0
    while piece := stream.readline(MAX_LINE_BYTES + 1):
        head, size = head or piece, size + len(piece)
        if piece.endswith(b"\n"):
            yield head, size, True
            head, size = b"", 0
    if size:
        yield head, size, False


class Follower:
    """One host's events file, followed from its first byte; each complete line goes to
    ``on_line`` (on the follower's own thread) as soon as it is written.

    The reader starts on the follower's own thread, not the caller's: starting it forks
    the controller, which on a loaded machine takes up to seconds, and the caller is the
    thread that reads every host's Ansible events (a batch of 32 hosts fell behind by 5-7 s
    when it started their followers itself, and every host's first lines with it). The
    thread that starts it is also the one whose end ends it (_die_with_parent)."""

    def __init__(self, argv: list[str], on_line: Callable[[str], None]) -> None:
        self.received = 0  # bytes of complete lines handed on
        self._on_line = on_line
        self._more = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, args=(argv,), daemon=True, name="follower"
        )
        self._thread.start()

    def _run(self, argv: list[str]) -> None:
        with self._more:
            if self._closed:
                return
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,  # tail's notes ("has appeared"), ssh's banners
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - prctl only, no locks taken
            )
        self._read(self._proc)

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for head, size, ended in capped_lines(proc.stdout):
            if not ended:
                break  # the follower was stopped in the middle of a line
            line = head.decode("utf-8", "replace").strip()
            if line:
                self._on_line(line)
            with self._more:
                self.received += size
                self._more.notify_all()

    def drain(self, size: int, timeout: float) -> bool:
        """Wait until ``size`` bytes of the file have been handed on; False on time-out."""
        deadline = time.monotonic() + timeout
        with self._more:
            while self.received < size:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._more.wait(left)
        return True

    def close(self) -> None:
        with self._more:  # once the reader has started, or so that it never starts
            self._closed = True
            proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._thread.join(timeout=5)
