"""Runs ansible-playbook for the controller and ends it, workers included, when the
controller dies (run as a script: ``python ansible_guard.py CONTROLLER_PID COMMAND...``).

ansible passes a SIGTERM to its workers, but a worker forked in the instant the signal
arrives is not yet in its list: orphaned, it would run its module (a tail that lasts the
whole run) to the end. So the guard waits for ansible, then kills what is left with
ansible's own command line (its workers are forks, not execs). Standard library only:
this file runs without the controller's packages on its path."""

import ctypes
import os
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _forks_of(command: list[str]) -> list[int]:
    """Live processes other than this one running ``command`` (its arguments end their
    command line; the kernel puts the interpreter before a script's path)."""
    args = "\0".join(command[1:]).encode() + b"\0"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            if cmdline.endswith(args) and command[0].encode() in cmdline:
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _kill_with_session(pid: int) -> None:
    """SIGKILL a worker and the modules it started (a worker leads its own session)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:  # not a group leader yet, or gone
            continue


def main(controller: int, command: list[str]) -> int:
    _die_with_parent()
    if os.getppid() != controller:
        sys.exit("fleetperf: the controller ended before ansible started")
    child = os.fork()
    if child == 0:
        _die_with_parent()  # the guard killed outright (runner's cancel kills the group)
        os.execvp(command[0], command)
    # SIGTERM from the dead controller, SIGHUP/SIGINT from runner: ansible handles them.
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda signum, _frame: os.kill(child, signum))
    _, status = os.waitpid(child, 0)
    for pid in _forks_of(command):
        _kill_with_session(pid)
    if os.WIFSIGNALED(status):  # end as ansible did, for runner's return code
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2:]))
