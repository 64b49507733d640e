"""The process executor of fleetperf's launch module: the workload runs under the host's
Python in a session of its own, detached from Ansible, through SUPERVISOR, which waits
for it so that its exit status lands in the run directory even though Ansible has long
returned. A docker launch runs the same supervisor in its container
(module_utils/fleetperf_docker.py), so stdout.log, stderr.log and exit_code land in the
run directory either way. The stop and tail modules find the supervisor through
workload.pid and workload.id (module_utils/fleetperf_host.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

from . import fleetperf_host as files

# A constant program: argv[1] the run directory, the rest the workload's argv.
SUPERVISOR = r"""
import os, signal, subprocess, sys
run_dir, argv = sys.argv[1], sys.argv[2:]
with open(os.path.join(run_dir, "stdout.log"), "ab") as out, \
     open(os.path.join(run_dir, "stderr.log"), "ab") as err:
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
rc = proc.wait()
tmp = os.path.join(run_dir, "exit_code.tmp")
if os.path.lexists(tmp):  # the workload's: never written through
    os.unlink(tmp)
with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644), "w") as f:
    f.write(str(rc))
os.replace(tmp, os.path.join(run_dir, "exit_code"))
"""


def supervised(python: str, run_dir: str, argv: list[str]) -> list[str]:
    """The command that runs ``argv`` under the supervisor with ``python``."""
    return [python, "-c", SUPERVISOR, run_dir, *argv]


def launch(
    run_dir: str,
    argv: list[str],
    chdir: str,
    env: dict[str, str],
    base: dict[str, str] | None = None,
) -> int:
    """Start ``argv`` under the supervisor in ``chdir``, ``env`` over ``base`` (the module's
    own environment where None: what Ansible gave it); the supervisor's pid, recorded in
    ``run_dir`` with its identity."""
    proc = subprocess.Popen(
        supervised(sys.executable, run_dir, argv),
        cwd=chdir,
        env={**(os.environ if base is None else base), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # own process group: cleanup kills the whole tree
        close_fds=True,
    )
    files.record(run_dir, proc.pid)
    return proc.pid
