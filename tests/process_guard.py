"""pytest plugin: no test leaves a process running, pass or fail.

Each test process becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever a test
starts stays its descendant even after it detaches (a workload's supervisor forks away from
its launcher; an ``ansible-playbook`` outlives a ``fleetperf`` killed by a time-out). After
each test, once its own fixtures have cleaned up, every process that was not there when
the test began is killed and reaped. A test that passed although it left something running
errors at teardown, naming what: leaving work behind is a bug even when the numbers are
right. Ansible's SSH connection sharing (a control master, the sshd session serving it) is
meant to outlive a task; those are stopped without counting as left behind.

A test must also leave the test process's signal handling as it found it: an ignored or
blocked SIGTERM is inherited by every process started later on the same worker, and turns
other tests' stops into kills far from their cause. A change is undone and fails the test.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

import pytest

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 1.0  # a process already on its way out (killed with its parent) may finish dying
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_SIGNALS = pytest.StashKey[tuple[object, ...]]()
_INHERITED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _signal_state() -> tuple[object, ...]:
    """The handlers of the signals children inherit as ignored, and the blocked mask."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    return (*(signal.getsignal(s) for s in _INHERITED), mask)


def _restore_signal_state(state: tuple[object, ...]) -> None:
    *handlers, mask = state
    for signum, handler in zip(_INHERITED, handlers, strict=True):
        signal.signal(signum, handler)  # type: ignore[arg-type]
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # type: ignore[arg-type]


def descendants(pid: int) -> dict[int, str]:
    """{pid: command line} of every live descendant of ``pid``."""
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    found[int(child)] = _cmdline(int(child))
                    todo.append(int(child))
    return found


def live_argvs() -> dict[int, list[bytes]]:
    """{pid: argv} of every live (not zombie) process on this machine but this one."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid() or _zombie(int(proc.name)):
            continue
        with contextlib.suppress(OSError):
            found[int(proc.name)] = (proc / "cmdline").read_bytes().split(b"\0")[:-1]
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip() or "?"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _connection_sharing(cmdline: str) -> bool:
    return "[mux]" in cmdline or cmdline.startswith("sshd:")


def stop_all(pids: dict[int, str]) -> None:
    """SIGKILL each, then reap those that are (now) our children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG) != (0, 0):
                    break
            except ChildProcessError:  # not ours to reap: its own parent does
                if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                    break
            time.sleep(0.02)


def pytest_configure(config: pytest.Config) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    config.stash[_REPORTS] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _SIGNALS not in item.config.stash:  # as the first test found it
        item.config.stash[_SIGNALS] = _signal_state()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After every fixture the test ends (a module's too), the signal handling is the first
    test's, or the teardown errors naming the test."""
    result = yield
    expected = item.config.stash[_SIGNALS]
    if _signal_state() != expected:
        _restore_signal_state(expected)
        pytest.fail("changed this process's signal handlers or mask (now restored)", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.when == "call":
        item.config.stash[_REPORTS][item.nodeid] = report
    return report


def _new_descendants(before: set[int]) -> dict[int, str]:
    return {pid: cmd for pid, cmd in descendants(os.getpid()).items() if pid not in before}


@pytest.fixture(autouse=True)
def no_process_left(request: pytest.FixtureRequest):
    """Set up before, and torn down after, every other function fixture of the test."""
    before = set(descendants(os.getpid()))
    yield
    new = _new_descendants(before)
    deadline = time.monotonic() + GRACE_S
    while any(not _zombie(p) for p in new) and time.monotonic() < deadline:
        time.sleep(0.05)
        new = _new_descendants(before)
    running = {pid: cmd for pid, cmd in new.items() if not _zombie(pid)}
    stop_all(new)  # zombies too: an orphan that exited is ours to reap
    report = request.config.stash[_REPORTS].pop(request.node.nodeid, None)
    leaked = [f"{pid} {cmd[:120]}" for pid, cmd in running.items() if not _connection_sharing(cmd)]
    if leaked and report is not None and report.passed:
        pytest.fail("left running (now killed):\n  " + "\n  ".join(leaked), pytrace=False)
