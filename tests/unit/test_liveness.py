"""Liveness that cannot be fooled (issue 26 point 5): a run is marked interrupted only when
this controller can prove its controller gone, and prune never removes a run another live
controller may own. Real controllers: small Pythons that write their run through the real
store, some in a PID namespace of their own (``unshare``, as root)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO
from seed_records import distilbert

from tui import cli
from tui.core import liveness
from tui.core.paths import store_path
from tui.results.interrupted import controller_id, mark_interrupted
from tui.results.store import ResultStore

TESTS = REPO / "tests"

# A controller: writes its run 'running' the way the engine does (its lease from
# controller_id(), through ResultStore.add), says which, and lives until its stdin closes.
CONTROLLER = f"""
import json, os, sys
sys.path[:0] = [{str(REPO)!r}, {str(TESTS)!r}]
from seed_records import distilbert
from tui.executors.base import new_run_id
from tui.results.store import ResultStore
from tui.results.interrupted import controller_id
record = distilbert(new_run_id("distilbert-pytorch"), "A100x1x8", {{}}, (1, 1, 1, 1, 0.9, 1),
                    status="running", finished=None, controller=controller_id())
with ResultStore(sys.argv[1]) as store:
    store.add(record)
print(json.dumps({{"run_id": record.run_id, "pid": os.getpid()}}), flush=True)
sys.stdin.read()
"""

# PID 1 of a new PID namespace: the next process it starts gets pid argv[1] there.
AT_PID = """
import subprocess, sys
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(int(sys.argv[1]) - 1))
sys.exit(subprocess.run([sys.executable, "-c", *sys.argv[2:]]).returncode)
"""

# PID 1 of a new PID namespace: a controller that exits, a process given its pid, then
# this namespace's own judgment.
REUSED = f"""
import json, subprocess, sys
sys.path[:0] = [{str(REPO)!r}, {str(TESTS)!r}]
from tui.results.store import ResultStore
from tui.results.interrupted import mark_interrupted
gone = json.loads(subprocess.run([sys.executable, "-c", {CONTROLLER!r}, sys.argv[1]],
                                 input="", capture_output=True, text=True, check=True).stdout)
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(gone["pid"] - 1))
reuser = subprocess.Popen(["sleep", "60"])
with ResultStore(sys.argv[1]) as store:
    marked = [r.run_id for r in mark_interrupted(store)]
reuser.kill()
reuser.wait()
print(json.dumps({{"gone": gone, "reuser": reuser.pid, "marked": marked}}))
"""

needs_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="unshare --pid needs root"
)


def _in_pid_namespace(*argv: str) -> list[str]:
    return ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", *argv]


def _free_pid() -> int:
    """A pid no process here holds: "hostname:pid" liveness would call its owner dead."""
    return next(p for p in range(40000, 2**22) if not Path(f"/proc/{p}").exists())


@needs_unshare
def test_a_controller_in_another_pid_namespace_keeps_its_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    store = store_path(results)
    pid = _free_pid()
    argv = _in_pid_namespace(AT_PID, str(pid), CONTROLLER, str(store))
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as ns:
        try:
            started = json.loads(ns.stdout.readline())
            run_id = started["run_id"]
            (results / "runs" / run_id).mkdir(parents=True)
            assert started["pid"] == pid and not Path(f"/proc/{pid}").exists()
            with ResultStore(store) as shared:
                assert mark_interrupted(shared) == []
            assert cli.main(["results", "--results", str(results), "--prune", run_id]) == 0
            code = cli.main(["results", "--results", str(results), "--prune", "--status", "all"])
            assert code == 0
            with ResultStore(store) as shared:
                assert shared.get(run_id).status == "running"
            assert (results / "runs" / run_id).is_dir()
        finally:
            ns.stdin.close()
        assert ns.wait(timeout=30) == 0


@needs_unshare
def test_a_pid_reused_by_another_process_is_proven_dead(tmp_path: Path) -> None:
    store = store_path(tmp_path)
    out = subprocess.run(
        _in_pid_namespace(REUSED, str(store)), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["reuser"] == seen["gone"]["pid"]  # the dead controller's pid is taken again
    assert seen["marked"] == [seen["gone"]["run_id"]]
    with ResultStore(store) as shared:
        assert shared.get(seen["gone"]["run_id"]).status == "interrupted"


def test_a_gone_controller_of_this_namespace_is_marked_and_a_live_one_kept(
    tmp_path: Path,
) -> None:
    store = store_path(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", CONTROLLER, str(store)],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    gone = json.loads(out.stdout)
    mine = distilbert("mine", "A100x1x8", {}, (1, 1, 1, 1, 0.9, 1), status="running")
    with ResultStore(store) as shared:
        shared.add(mine.model_copy(update={"controller": controller_id()}))
        lease = liveness.parse(shared.get(gone["run_id"]).controller)
        assert [r.run_id for r in mark_interrupted(shared)] == [gone["run_id"]]
        assert shared.get("mine").status == "running"
    assert lease is not None and (lease.host, lease.pid) == (socket.gethostname(), gone["pid"])
    here = liveness.this_controller()
    assert lease.boot_id == liveness.boot_id() == here.boot_id is not None
    assert lease.pidns == os.stat("/proc/self/ns/pid").st_ino == here.pidns
    assert lease.start is not None and lease.start > 0


def test_an_old_hostname_pid_record_is_read_and_left_running(tmp_path: Path) -> None:
    # Written by a fleetperf before the lease: its pid proves nothing (any namespace).
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    old = f"{socket.gethostname()}:{dead.stdout.strip()}"
    record = distilbert("old", "A100x1x8", {}, (1, 1, 1, 1, 0.9, 1), status="running")
    with ResultStore(tmp_path / "store.sqlite") as store:
        store.add(record.model_copy(update={"controller": old}))
        assert mark_interrupted(store) == []
        assert store.get("old").status == "running"
        assert store.get("old").controller == old
    assert liveness.parse(old) == liveness.Lease(socket.gethostname(), int(dead.stdout))


def test_what_can_and_cannot_prove_a_controller_gone() -> None:
    mine = liveness.this_controller()
    other_boot = str(uuid.uuid4())
    assert liveness.proven_dead(replace(mine, boot_id=other_boot), mine) is (
        mine.machine_id is not None  # this machine rebooted since: all its processes gone
    )
    cannot = [
        None,
        mine,  # this very process
        replace(mine, host="elsewhere"),
        replace(mine, boot_id=other_boot, machine_id=None),  # no machine id: a reboot unknown
        replace(mine, boot_id=other_boot, machine_id="another machine"),
        replace(mine, pidns=(mine.pidns or 0) + 1, pid=2**22 + 1),  # another PID namespace
        replace(mine, timens=(mine.timens or 0) + 1, pid=2**22 + 1),  # start times offset
        replace(mine, start=None, pid=2**22 + 1),
        replace(mine, boot_id=None, pid=2**22 + 1),
    ]
    assert [liveness.proven_dead(lease, mine) for lease in cannot] == [False] * len(cannot)
    assert liveness.proven_dead(replace(mine, pid=2**22 + 1), mine)  # no such pid here
    assert liveness.proven_dead(replace(mine, start=(mine.start or 0) + 1), mine)  # pid reused


# A lease of a fixed shape (ids must not depend on the collecting process: pytest-xdist's
# workers collect separately and must agree).
_LEASE = {"host": "h", "pid": 7, "start": 1, "boot_id": "b", "pidns": 1, "timens": 1,
          "machine_id": None}  # fmt: skip


@pytest.mark.parametrize(
    "text",
    ["", "host", "host:", "host:x", "{", "[1]", '{"host": "h"}', "{}",
     json.dumps({**_LEASE, "pid": -1}),
     json.dumps({**_LEASE, "start": "1"}),
     json.dumps({**_LEASE, "extra": 1})],
)  # fmt: skip
def test_a_lease_that_cannot_be_read_proves_nothing(text: str) -> None:
    assert liveness.parse(text) is None


def test_a_lease_reads_back_as_written() -> None:
    assert liveness.parse(controller_id()) == liveness.this_controller()
    assert liveness.parse(json.dumps(_LEASE)) is not None  # the shape the bad ones break


# ------------------------------------------------------------------ the host-side lease
def _host_utils(monkeypatch: pytest.MonkeyPatch):  # playbooks/module_utils as Ansible loads it
    import ansible.module_utils as mu

    monkeypatch.setattr(mu, "__path__", [*mu.__path__, str(REPO / "playbooks" / "module_utils")])
    from ansible.module_utils import fleetperf_host

    return fleetperf_host


def test_host_lease_proves_a_controller_gone_only_in_its_own_namespace(monkeypatch) -> None:
    """The host lease preflight checks (issue 26 point 5, the host side): it named its
    controller by boot id and pid only, so a host on the controller's machine took over the
    lease of a live controller in a container (another PID namespace) whose pid was free
    there. Now the lease carries the liveness fields and only a controller in the module's
    own namespaces can be proven gone."""
    from tui.executors.base import _controller

    host = _host_utils(monkeypatch)
    mine = _controller()
    assert {"pid", "start", "boot_id", "pidns", "timens"} <= set(mine)
    assert not host.controller_gone(mine)  # this process runs

    code = "import json; from dataclasses import asdict; from tui.core import liveness; "
    code += "print(json.dumps(asdict(liveness.this_controller())))"
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    gone = json.loads(child.stdout)
    assert host.controller_gone(gone)  # exited, same machine and namespaces
    assert not host.controller_gone({**gone, "pidns": gone["pidns"] + 1})  # another namespace
    assert not host.controller_gone({**gone, "boot_id": "another-boot"})
    assert not host.controller_gone({k: gone[k] for k in ("host", "pid", "boot_id")})  # old form
    # a reused pid: this process's pid with another start time
    assert host.controller_gone({**mine, "start": mine["start"] + 1})
