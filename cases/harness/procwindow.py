"""What other processes used of the host's CPUs during a run, from /proc (docs/monitoring.md).

``ProcWindow(root)`` reads every visible process's CPU time (``/proc/PID/stat``: utime,
stime and the times of the children it reaped) when it is made; ``figures()`` reads them
again and returns the window since: the CPU seconds used by processes that are not ``root``
or its descendants, the top three of them by name, and the host's CPU count. A process
that started and ended inside the window counts through the parent that reaped it; one
reaped by a process this host does not show (another pid namespace) is not seen. Processes
of other containers are not visible in a container's /proc: they are not counted.

fleetperf's own machinery is not other work either (``own``): Ansible's module runs on the
host (the launch and the polls: the ``sh -c '... && sleep 0'`` wrapper and what it starts),
the non-interactive SSH sessions they run in (whose reaped children's CPU lands on them),
and, where the controller shares the machine, the controller (``-m tui.cli`` or
``fleetperf``), its descendants (ansible-playbook, ssh) and Ansible's SSH connection masters.
Its CPU is reported apart (``fleetperf_cpu_s``): on hosts that share one machine, counted
as other work it made almost every short run busy.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

TOP = 3  # processes named in a busy verdict
_NAME_CHARS = 64

# (pid, start time in ticks): a pid reused within the window is another process.
_Key = tuple[int, int]
# An SSH session without a terminal, as sshd titles it: Ansible's connection, scp, sftp.
_SSH_NOTTY = re.compile(r"sshd(-session)?: \S+@notty")
_MUX_DIRS = ("/.ansible/cp/", "/fleetperf-cp-")  # Ansible's ControlPath dirs, fleetperf's


def fleetperf_own(argv: list[str]) -> bool:
    """Whether a process with command line ``argv`` is fleetperf's own machinery (the
    module docstring says which); a command line can be forged, which only makes a
    neighbour look quiet to a run that then measures it: the numbers show it."""
    if not argv:
        return False
    if _SSH_NOTTY.fullmatch(argv[0].strip()):
        return True
    if os.path.basename(argv[0]) == "ssh" and "[mux]" in argv[-1]:
        return any(d in a for a in argv for d in _MUX_DIRS)
    return _spawner(argv)


def _spawner(argv: list[str]) -> bool:
    """A process whose descendants are fleetperf's too: the controller (``python -m
    tui.cli``, the ``fleetperf`` script), or Ansible's wrapper of a module run (``/bin/sh -c
    '... && sleep 0'``, or become's ``BECOME-SUCCESS-`` echo): with pipelining the module is
    a bare ``python3`` reading its code from stdin, whose command line names nothing."""
    if "tui.cli" in argv[1:3] and "-m" in argv[:2]:
        return True
    if any(os.path.basename(a) == "fleetperf" for a in argv[:2]):
        return True
    return argv[1:2] == ["-c"] and any(
        a.endswith("&& sleep 0") or "BECOME-SUCCESS-" in a for a in argv[2:3]
    )


def _argv(proc: Path, pid: int) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:  # ended, or not ours to read
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _read(proc: Path) -> dict[_Key, tuple[int, str, int]]:
    """Each visible process: key -> (parent pid, name, CPU ticks incl. reaped children)."""
    out: dict[_Key, tuple[int, str, int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # ended between the listing and the read
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()  # fields[0] is stat's field 3
        try:
            ppid, start = int(fields[1]), int(fields[19])
            ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        except (IndexError, ValueError):
            continue
        out[(int(entry.name), start)] = (ppid, name[:_NAME_CHARS], ticks)
    return out


def _tree(snapshot: dict[_Key, tuple[int, str, int]], root: int) -> set[_Key]:
    """The keys of ``root`` and its descendants in one snapshot."""
    children: dict[int, list[_Key]] = {}
    for key, (ppid, _, _) in snapshot.items():
        children.setdefault(ppid, []).append(key)
    found = {key for key in snapshot if key[0] == root}
    todo = [key[0] for key in found]
    while todo:
        for key in children.get(todo.pop(), []):
            if key not in found:
                found.add(key)
                todo.append(key[0])
    return found


def run_root(run_dir: str, proc: Path = Path("/proc")) -> int:
    """The run's topmost process: the furthest ancestor of this one whose command line
    names ``run_dir`` (the launch's supervisor, torchrun), else this process."""
    root, pid = os.getpid(), os.getpid()
    want = os.path.normpath(run_dir)
    while pid > 1:
        try:
            argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if any(os.path.normpath(a.decode(errors="replace")) == want for a in argv if a):
            root = pid
        pid = ppid
    return root


class ProcWindow:
    """The CPU other processes use from now on; ``root``'s process tree is the run's."""

    def __init__(
        self,
        root: int,
        proc: Path = Path("/proc"),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root, self.proc, self.clock = root, proc, clock
        self._tick = os.sysconf("SC_CLK_TCK")
        self._t0 = clock()
        self._start = _read(proc)
        self._ours = _tree(self._start, root)
        self._own: set[_Key] = set()  # fleetperf's own, by command line
        self._spawners: dict[_Key, bool] = {}  # ancestors asked whether fleetperf's spawner

    def figures(self) -> dict[str, object]:
        """The window so far: ``others_cpu_s``, ``fleetperf_cpu_s``, ``window_s``,
        ``host_cpus`` and ``others`` (up to TOP of {pid, name, cpu_s}, most first): the sys
        event's window fields."""
        now, t = _read(self.proc), self.clock()
        ours = self._ours | _tree(now, self.root)
        before = self._start
        cap = max(t - self._t0, 0.0) * (os.cpu_count() or 1) * self._tick  # what a window holds
        used: dict[_Key, int] = {
            key: min(ticks - (before[key][2] if key in before else 0), int(cap))
            for key, (_, _, ticks) in now.items()
            if key not in ours
        }
        own = self._own_keys(now, {k for k, v in used.items() if v > 0})
        totals = {False: 0, True: 0}  # by fleetperf_own
        for key, ticks in used.items():
            totals[key in own] += ticks
        # A process gone since the start: its last figures moved to the parent that reaped
        # it, counted above; what it had used before the window is not the window's.
        parents = {key[0]: key in own for key in now if key not in ours}
        for key, (ppid, _, ticks) in before.items():
            if key not in now and key not in ours and ppid in parents:
                totals[parents[ppid]] -= ticks
        others = {k: v for k, v in used.items() if v > 0 and k not in own}
        top = sorted(others, key=lambda k: -others[k])[:TOP]
        return {
            "others_cpu_s": max(totals[False], 0) / self._tick,
            "fleetperf_cpu_s": max(totals[True], 0) / self._tick,
            "window_s": t - self._t0,
            "host_cpus": os.cpu_count() or 1,
            "others": [
                {"pid": k[0], "name": now[k][1], "cpu_s": others[k] / self._tick} for k in top
            ],
        }

    def _own_keys(self, now: dict[_Key, tuple[int, str, int]], keys: set[_Key]) -> set[_Key]:
        """Those of ``keys`` (processes that used CPU in the window) that are fleetperf's own
        or descend from one of its spawners (``_spawner``). A yes is kept for the process's
        life; a no is asked again (a process just forked may not have exec'd or titled itself
        yet)."""
        by_pid = {key[0]: key for key in now}
        found = set()
        for key in keys:
            if key not in self._own and fleetperf_own(_argv(self.proc, key[0])):
                self._own.add(key)
            if key in self._own or any(self._spawner(a) for a in _ancestors(now, by_pid, key)):
                found.add(key)
        self._own &= now.keys()  # forget the ended: a long run's window must not grow
        self._spawners = {k: v for k, v in self._spawners.items() if k in now}
        return found

    def _spawner(self, key: _Key) -> bool:
        if key not in self._spawners:
            self._spawners[key] = _spawner(_argv(self.proc, key[0]))
        return self._spawners[key]


def _ancestors(
    now: dict[_Key, tuple[int, str, int]], by_pid: dict[int, _Key], key: _Key
) -> list[_Key]:
    found: list[_Key] = []
    while (parent := by_pid.get(now[key][0])) is not None and parent not in found:
        found.append(parent)
        key = parent
    return found


def cpu_freq_mhz(root: Path = Path("/sys/devices/system/cpu")) -> float | None:
    """The CPUs' mean current frequency in MHz (cpufreq's scaling_cur_freq), or None where
    cpufreq is not readable (most VMs and containers)."""
    values = []
    for path in root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            values.append(int(path.read_text()) / 1000.0)  # kHz
        except (OSError, ValueError):
            continue
    return sum(values) / len(values) if values else None
