"""Whether the controller that left a run 'running' is provably gone (issue 26 point 5).

A run record keeps its controller's lease: host name, /etc/machine-id, kernel boot id, PID
and time namespaces, pid and the pid's start time. A hostname and a pid alone prove
nothing: a controller in a container (``--network host``) or on another machine sharing
the results directory has the same hostname, and its pid means nothing here. So a run is
judged dead only where this controller can see the owner's process table:

- same host, boot id, PID namespace and time namespace, and the pid is gone or its start
  time differs (the pid was reused), or
- same host and machine id but another boot id: that machine rebooted since, so every
  process of it is gone. (A machine without a machine id, as most container images are,
  cannot prove this: two machines' containers may share a hostname.)

Anything else (another host, namespace or machine, a lease that cannot be read, or the old
``hostname:pid`` form) cannot be proven dead and stays running.
Controller code: no torch, no textual.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_PID = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True)
class Lease:
    """Who runs a run, in enough detail for another controller to prove it gone."""

    host: str
    pid: int
    start: int | None = None  # clock ticks after boot: /proc/PID/stat field 22
    boot_id: str | None = None
    pidns: int | None = None  # inode of /proc/PID/ns/pid
    timens: int | None = None  # start times are offset by a time namespace
    machine_id: str | None = None

    def text(self) -> str:
        """The record's ``controller`` field: a JSON object, one key per field."""
        return json.dumps(asdict(self), sort_keys=True)


def parse(text: str | None) -> Lease | None:
    """The lease a record's ``controller`` field holds; None where it cannot be read."""
    if not text:
        return None
    if not text.startswith("{"):
        host, sep, pid = text.rpartition(":")
        # ASCII digits only ("²".isdigit() is true), and few enough for int().
        return Lease(host, int(pid)) if sep and _PID.fullmatch(pid) else None
    try:
        data = json.loads(text)
        return _lease(data) if isinstance(data, dict) else None
    except (ValueError, TypeError):
        return None


def _lease(data: dict[str, Any]) -> Lease | None:
    """A lease from its JSON fields, each of its type or null; None if any is not."""
    ints = ("pid", "start", "pidns", "timens")
    strs = ("host", "boot_id", "machine_id")
    if set(data) != {*ints, *strs} or data["host"] is None or not data["pid"]:
        return None
    for name in ints:
        if data[name] is not None and (type(data[name]) is not int or data[name] < 0):
            return None
    if any(data[name] is not None and not isinstance(data[name], str) for name in strs):
        return None
    return Lease(**data)


_MINE: dict[int, Lease] = {}  # by pid: a forked child is a controller of its own


def this_controller() -> Lease:
    """This process's lease, read once (a hostname changed mid-run must not disown it)."""
    pid = os.getpid()
    if pid not in _MINE:
        _MINE[pid] = _read_lease(pid)
    return _MINE[pid]


def _read_lease(pid: int) -> Lease:
    # /proc can belong to another PID namespace (a container given the host's): its
    # /proc/self is not this process, and nothing read from it can prove anything.
    stat = _stat("self")
    ours = stat is not None and stat[0] == pid
    return Lease(
        host=socket.gethostname(),
        pid=pid,
        start=stat[1] if stat and ours else None,
        boot_id=boot_id(),
        pidns=_ns_inode("pid") if ours else None,
        timens=_ns_inode("time") if ours else None,
        machine_id=_first_line(Path("/etc/machine-id")),
    )


def boot_id() -> str | None:
    """The running kernel's boot id (Linux); None elsewhere."""
    return _first_line(Path("/proc/sys/kernel/random/boot_id"))


def _first_line(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _stat(pid: int | str) -> tuple[int, int] | None:
    """(pid, start time in clock ticks after boot) from /proc/PID/stat; None if unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        after_name = text.rpartition(")")[2].split()  # the name, field 2, may hold anything
        return int(text.split(maxsplit=1)[0]), int(after_name[19])  # fields 1 and 22
    except (OSError, ValueError, IndexError):
        return None


def _ns_inode(kind: str) -> int | None:
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


def same_machine(lease: Lease | None, judge: Lease | None = None) -> bool:
    """Whether the lease's controller ran on the machine ``judge`` (this controller by
    default) runs on: the same host name and machine id. Without a machine id (most
    container images) no run can be told from another machine's: none is."""
    judge = judge or this_controller()
    return (
        lease is not None
        and lease.host == judge.host
        and judge.machine_id is not None
        and lease.machine_id == judge.machine_id
    )


def proven_dead(lease: Lease | None, judge: Lease | None = None) -> bool:
    """Whether ``judge`` (this controller by default) can prove the lease's controller gone."""
    judge = judge or this_controller()
    if lease is None or lease.host != judge.host:
        return False
    if lease.boot_id is None or judge.boot_id is None:
        return False
    if lease.boot_id != judge.boot_id:  # another kernel: a reboot, if the same machine
        return lease.machine_id is not None and lease.machine_id == judge.machine_id
    same_table = judge.pidns is not None and lease.pidns == judge.pidns
    if not same_table or lease.timens != judge.timens or lease.start is None:
        return False
    return _gone(lease.pid, lease.start)


def _gone(pid: int, start: int) -> bool:
    """The pid is free, or held by a process that started at another time."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's process: it exists
        pass
    except OverflowError:  # no pid that large on this kernel
        return True
    now = _stat(pid)  # None: hidden (hidepid) or gone just now, which proves nothing
    return now is not None and now[1] != start
