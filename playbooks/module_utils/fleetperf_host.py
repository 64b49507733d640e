"""Host-side safety of fleetperf's run modules: run-dir files without following links, the
workload's process identity, and the host lease's lock.

A run directory is the workload's to write (a container has it mounted read-write): any
name in it may be a symbolic link, a FIFO or a device by the time host-side code looks.
Reads here take regular files only and never follow a link (``O_NOFOLLOW`` and ``fstat``);
writes replace the name atomically (a temp file made with ``O_EXCL``, then ``rename``,
which replaces a link rather than writing through it) or create it only if nothing is
there. A pid alone names whatever process has that number now (after a reboot, or once
the number is reused): the launch records the supervisor's boot id and start time beside
it, and nothing is signalled unless both still match.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

PID_FILE = "workload.pid"  # the supervisor's pid, which is also its process group
IDENTITY = "workload.id"  # JSON: pid, boot_id, start (clock ticks after boot)


def staging_hint(case: str) -> str:
    """The command that stages a case's missing data, for a refusal: the one that works
    with no data at hand (``prepare`` alone is refused); the controller adds ``--data-root``
    where its data root is not the default (tui/engine/session.py)."""
    return (
        f"stage it with: fleetperf prepare {case} --synthetic;"
        " for the real data, --from DIR in place of --synthetic"
    )


def open_regular(path: str) -> int | None:
    """A read-only descriptor of path if it is a regular file (a link is not followed);
    None for anything else or nothing."""
    if not is_regular(path):  # not even opened: opening a device can do things
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device opened without blocking
        os.close(fd)
        return None
    return fd


def read_bytes(
    path: str, offset: int = 0, limit: int = -1, tail: int | None = None
) -> bytes | None:
    """Bytes of the regular file at path from offset (or its last ``tail`` bytes), at
    most ``limit``; None where no regular file is (missing, a link, a FIFO)."""
    fd = open_regular(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        if tail is not None:
            offset = max(0, os.fstat(fd).st_size - tail)
        f.seek(offset)
        return f.read(limit)


def read_text(path: str, tail: int | None = None) -> str | None:
    data = read_bytes(path, tail=tail)
    return None if data is None else data.decode("utf-8", "replace")


def plain(name: str) -> bool:
    """A plain file name: one component, not . or .."""
    return bool(name) and "/" not in name and name not in (".", "..")


# A member cut to its limit carries the file's whole size in this pax header, for the
# controller's notes (tui/executors/hostfiles.py unpack_host_files).
CUT_HEADER = "FLEETPERF.size"
KEEPS = ("head", "tail")


def limits(raw: dict) -> dict[str, tuple[int, str]]:
    """A collect module's ``limits``: NAME -> (bytes, "head" or "tail"); ValueError naming
    the entry that is not that."""
    out = {}
    for name, limit in raw.items():
        size = limit.get("bytes") if isinstance(limit, dict) else None
        keep = limit.get("keep") if isinstance(limit, dict) else None
        if type(size) is not int or size < 0 or keep not in KEEPS:
            raise ValueError(f"limits.{name}: expected {{bytes: N >= 0, keep: head|tail}}")
        out[name] = (size, keep)
    return out


def window(size: int, limit: tuple[int, str] | None) -> tuple[int, int]:
    """Of a file of ``size`` bytes, where the part kept under ``limit`` (bytes, "head" or
    "tail") starts, and its length."""
    if limit is None or size <= limit[0]:
        return 0, size
    return (size - limit[0] if limit[1] == "tail" else 0), limit[0]


def add_to_tar(
    tar: tarfile.TarFile, src: BinaryIO, name: str, limit: tuple[int, str] | None = None
) -> int | None:
    """The regular file open as ``src`` as member ``name``: its size and mode from what is
    open (no second lookup of a name the workload may have changed), owned by nobody. With
    ``limit``, a larger file goes in as the part ``window`` keeps, its whole size in the
    member's CUT_HEADER (``tar`` must be PAX_FORMAT); that size is returned, else None."""
    member = tar.gettarinfo(arcname=name, fileobj=src)
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    size = member.size
    start, member.size = window(size, limit)
    if member.size < size:
        member.pax_headers = {CUT_HEADER: str(size)}
    src.seek(start)
    tar.addfile(member, src)
    return size if member.size < size else None


def small_archive(run_dir: str, names: list[str], raw_limits: dict, cap: int) -> str | None:
    """The run's regular files among ``names``, each within its limit, as a PAX tar file in
    base64, where the archive is at most ``cap`` bytes; else None (fetched as a file). A
    file too large for it is never read."""
    kept = limits(raw_limits)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            fd = open_regular(os.path.join(run_dir, name))
            if fd is None:
                continue
            with os.fdopen(fd, "rb") as src:
                if out.tell() + window(os.fstat(fd).st_size, kept.get(name))[1] > cap:
                    return None
                add_to_tar(tar, src, name, kept.get(name))
    data = out.getvalue()
    return base64.b64encode(data).decode("ascii") if len(data) <= cap else None


def regular_stat(path: str) -> os.stat_result | None:
    """lstat of path if it is a regular file, else None."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def is_regular(path: str) -> bool:
    return regular_stat(path) is not None


def replace(path: str, text: str) -> None:
    """Write path as a new regular file, atomically; whatever was there (a link too) is
    replaced, never written through."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)  # O_EXCL: a fresh file
    try:
        os.fchmod(fd, 0o644)  # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def create(path: str, text: str) -> bool:
    """Write path only if nothing (not even a dangling link) is there; whether it did."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


# ------------------------------------------------------------------------------ identity
def boot_id() -> str:
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def start_time(pid: int) -> int | None:
    """When pid started, in clock ticks after boot (/proc/PID/stat field 22); None if no
    such process lives."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat_line = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat_line[stat_line.rindex(")") + 2 :].split()  # from field 3 (state) on
    return None if fields[0] == "Z" else int(fields[19])


def namespace(kind: str) -> int | None:
    """This process's namespace of ``kind`` (pid, time): the inode of /proc/self/ns/KIND."""
    try:
        return os.stat(f"/proc/self/ns/{kind}").st_ino
    except OSError:
        return None


def controller_gone(ctl: dict) -> bool:
    """Whether a lease's controller is provably gone: it ran on this kernel (boot id), in
    this process's PID and time namespaces, and its pid is free or names a process that
    started at another time. Anything else (a controller in a container on this host,
    another machine, a lease without those fields) proves nothing: the heartbeat decides."""
    pid = ctl.get("pid")
    if ctl.get("boot_id") != boot_id() or type(pid) is not int or pid <= 0:
        return False
    pidns = namespace("pid")
    if pidns is None or ctl.get("pidns") != pidns or ctl.get("timens") != namespace("time"):
        return False
    return ctl.get("start") is not None and start_time(pid) != ctl["start"]


def record(run_dir: str, pid: int) -> None:
    """At launch: the supervisor's pid and identity (workload.id first: a workload.pid
    is never without it)."""
    ident = {"pid": pid, "boot_id": boot_id(), "start": start_time(pid)}
    replace(os.path.join(run_dir, IDENTITY), json.dumps(ident))
    replace(os.path.join(run_dir, PID_FILE), str(pid))


def supervisor(run_dir: str) -> int | None:
    """The pid of the run's supervisor if it still runs, the very process the launch
    started: same pid, boot and start time, and it supervises this run dir. None when it
    ended, never started, or its number now names another process."""
    try:
        ident = json.loads(read_text(os.path.join(run_dir, IDENTITY)) or "null")
        pid = int(ident["pid"])
    except (ValueError, TypeError, KeyError):
        return None
    if ident.get("boot_id") != boot_id() or start_time(pid) != ident.get("start"):
        return None
    # A forged workload.id (a container writes its run dir) names no supervisor but ours:
    # the launch's argv is [python, -c, SUPERVISOR, run_dir, ...].
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    mine = os.path.normpath(run_dir).encode()
    if len(argv) < 4 or argv[1] != b"-c" or os.path.normpath(argv[3]) != mine:
        return None
    return pid


def running(run_dir: str) -> bool:
    """The run's workload still runs: no exit_code yet and its supervisor alive."""
    if os.path.lexists(os.path.join(run_dir, "exit_code")):
        return False
    return supervisor(run_dir) is not None


# ------------------------------------------------------------------------------ lease
@contextlib.contextmanager
def locked(lease: str) -> Iterator[None]:
    """Hold the lease's lock (flock on LEASE.lock beside it, a file never removed): every
    take, take-over and release of the lease happens under it."""
    fd = os.open(f"{lease}.lock", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_lease(lease: str) -> dict | None:
    """The lease's holder; None where there is none; {} for a file that is not a lease."""
    text = read_text(lease)
    if text is None:
        return None
    try:
        held = json.loads(text)
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def release(lease: str, run_id: str) -> bool:
    """Remove the lease if run ``run_id`` holds it; whether it did."""
    if not os.path.lexists(lease):
        return False
    with locked(lease):
        held = read_lease(lease)
        if not held or held.get("run_id") != run_id:
            return False
        os.unlink(lease)
    return True
