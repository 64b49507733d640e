"""The run modules of playbooks/library, each run as Ansible runs it: its own process, its
arguments in a JSON file, its result as JSON on stdout. Workloads are real processes."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from hostmodules import CONTROLLER, MODULE_UTILS, module, module_argv, preflight

from tui.executors import hostfiles
from tui.executors.stop import stop_run

NO_PID = str(2**22 + 1)  # above any pid_max: the tail tests' stand-in workload.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.fixture
def run_dir(tmp_path: Path):
    """A run directory; whatever a test launched there is killed afterwards."""
    path = tmp_path / "runs" / "run-1"
    path.mkdir(parents=True)
    yield path
    launched = path / "workload.id"  # only what a launch recorded: never a stand-in pid
    if launched.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(json.loads(launched.read_text())["pid"], signal.SIGKILL)


def launch(run_dir: Path, code: str) -> int:
    res, _ = module(
        "fleetperf_launch",
        run_dir.parent,
        run_dir=str(run_dir),
        argv=[sys.executable, "-c", textwrap.dedent(code)],
        chdir=str(run_dir),
    )
    assert res["changed"], res
    return int(res["pid"])


def wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


# ------------------------------------------------------------------------------ stop
# The supervisor of a finished workload may linger as a zombie until its parent reaps it
# (issue 13: the old stop module took it for alive, signalled and waited). This helper
# becomes the supervisor's parent (a child subreaper), so the zombie really exists while
# the stop module runs; it prints the stop result, then reaps.
ZOMBIE_STOP = """
import ctypes, json, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of ours come to us
run_dir, args_dir, argv = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def module(name, **args):
    path = os.path.join(args_dir, name + ".json")
    with open(path, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    out = subprocess.run([a.replace("NAME", name).replace("ARGS", path) for a in argv],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)
pid = module("fleetperf_launch", run_dir=run_dir, chdir=run_dir,
             argv=[sys.executable, "-c", "import sys; sys.exit(3)"])["pid"]
while not os.path.exists(os.path.join(run_dir, "exit_code")):
    time.sleep(0.02)
time.sleep(0.3)  # the supervisor has exited by now, unreaped
state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
t0 = time.monotonic()
res = module("fleetperf_stop", run_dir=run_dir, grace=20)
print(json.dumps({"zombie": state == "Z", "stop": res, "stop_s": time.monotonic() - t0}))
os.waitpid(pid, 0)
"""


def test_stop_of_an_exited_workload_returns_at_once_without_signalling(run_dir: Path) -> None:
    helper_argv = json.dumps(module_argv("NAME", "ARGS"))  # the helper fills both in
    done = subprocess.run(
        [sys.executable, "-c", ZOMBIE_STOP, str(run_dir), str(run_dir.parent), helper_argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = json.loads(done.stdout)
    assert out["zombie"]  # the situation of the issue: the supervisor not reaped yet
    assert out["stop"]["msg"] == "finished" and "signal" not in out["stop"]
    assert out["stop_s"] < 5  # no grace period (20 s) waited
    assert (run_dir / "exit_code").read_text() == "3"  # the workload's own code kept
    assert not (run_dir / "stop_reason").exists()


def test_stop_ends_the_whole_group_and_says_why(run_dir: Path) -> None:
    code = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        time.sleep(600)
    """
    pid = launch(run_dir, code)
    time.sleep(1.0)
    members = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _pgrp(p) == pid and p.name != str(pid)
    ]
    assert len(members) >= 2  # the workload and its child
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), reason="test says so")
    assert res["signal"] == signal.SIGTERM
    assert not any(alive(m) for m in members)
    assert (run_dir / "exit_code").read_text() == str(-signal.SIGTERM)
    assert (run_dir / "stop_reason").read_text() == "test says so"
    res, t = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir))
    assert res["msg"] == "finished" and not res["changed"]


def test_stop_reaches_ranks_in_their_own_session_and_kills_what_ignores_sigterm(
    run_dir: Path,
) -> None:
    """torchrun starts each rank in a new session: outside the workload's process group."""
    code = """
        import os, subprocess, sys, time
        rank = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
            start_new_session=True)
        open("rank.pid", "w").write(str(rank.pid))
        time.sleep(600)
    """
    pid = launch(run_dir, code)
    wait_for(run_dir / "rank.pid")
    rank = int((run_dir / "rank.pid").read_text())
    time.sleep(0.5)  # the rank has set its handler
    assert _pgrp(Path(f"/proc/{rank}")) != pid
    res, took = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), grace=1)
    assert res["signal"] == signal.SIGKILL  # the rank outlived the grace
    assert not alive(rank) and not alive(pid)
    assert 1.0 <= took < 10
    # the workload itself ended on SIGTERM, and its supervisor said so
    assert (run_dir / "exit_code").read_text() == str(-signal.SIGTERM)


def test_launch_is_idempotent_and_honours_check_mode(run_dir: Path) -> None:
    args = {"run_dir": str(run_dir), "argv": [sys.executable, "-c", "pass"]}
    dry, _ = module(
        "fleetperf_launch", run_dir.parent, **args, chdir=str(run_dir), _ansible_check_mode=True
    )
    assert dry["changed"] and "pid" not in dry and not (run_dir / "workload.pid").exists()
    pid = launch(run_dir, "import time; time.sleep(30)")
    again, _ = module("fleetperf_launch", run_dir.parent, **args, chdir=str(run_dir))
    assert (again["changed"], again["pid"], again["msg"]) == (False, pid, "already started")
    missing, _ = module("fleetperf_launch", run_dir.parent, run_dir=str(run_dir))
    assert missing["failed"] and "missing required arguments: argv, chdir" in missing["msg"]
    missing, _ = module("fleetperf_launch", run_dir.parent, argv=["true"], chdir=str(run_dir))
    assert missing["failed"] and "missing required arguments: run_dir" in missing["msg"]


def test_launch_on_an_unreachable_engine_fails_in_one_line(run_dir: Path) -> None:
    res, _ = module(
        "fleetperf_launch",
        run_dir.parent,
        run_dir=str(run_dir),
        argv=["python", "-c", "pass"],
        chdir=str(run_dir),
        executor="docker",
        docker_host=f"unix://{run_dir}/no-engine.sock",
        run_id="run-1",
        host="h1",
        container={"image": "fleetperf/cpu:test", "case": "emitter"},
    )
    assert res["failed"] and res["msg"].startswith("host h1: docker: ")
    assert "\n" not in res["msg"] and len(res["msg"]) > len("host h1: docker: ")


def test_stop_writes_the_exit_when_the_supervisor_could_not(run_dir: Path) -> None:
    """The supervisor writes exit_code; killed with its workload, stop writes the signal."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    pid = launch(run_dir, code)
    time.sleep(0.5)  # the handler set
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), grace=1)
    assert (res["changed"], res["msg"], res["signal"]) == (True, "stopped", signal.SIGKILL)
    assert not alive(pid)
    assert (run_dir / "exit_code").read_text() == str(-signal.SIGKILL)


def test_stop_before_a_launch_and_in_check_mode_touches_nothing(run_dir: Path) -> None:
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir))
    assert (res["changed"], res["msg"]) == (False, "never started")
    pid = launch(run_dir, "import time; time.sleep(600)")
    dry, _ = module(
        "fleetperf_stop", run_dir.parent, run_dir=str(run_dir), _ansible_check_mode=True
    )
    assert dry.get("skipped") and alive(pid)  # a stop is never simulated: Ansible skips it
    missing, _ = module("fleetperf_stop", run_dir.parent, grace=1)
    assert missing["failed"] and "run_dir" in missing["msg"] and alive(pid)


def test_stop_releases_only_its_own_lease(run_dir: Path) -> None:
    lease = run_dir.parent / "fleetperf.lease"
    args = {"run_dir": str(run_dir), "lease": str(lease)}
    res, _ = module("fleetperf_stop", run_dir.parent, **args)  # no lease file: nothing to free
    assert not res["changed"] and "released" not in res
    lease.write_text(json.dumps({"run_id": "run-2"}))
    res, _ = module("fleetperf_stop", run_dir.parent, **args)
    assert not res["changed"] and lease.exists()  # another run's
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    res, _ = module("fleetperf_stop", run_dir.parent, **args)
    assert (res["changed"], res["released"]) == (True, True) and not lease.exists()


def test_stop_for_a_refused_peer_releases_the_lease_then_fails_naming_it(run_dir: Path) -> None:
    """run.yml: one module run per host when another host of its run was refused."""
    lease = run_dir.parent / "fleetperf.lease"
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    args = {"run_dir": str(run_dir), "lease": str(lease), "host": "n1", "refused": ["n2", "n3"]}
    res, _ = module("fleetperf_stop", run_dir.parent, **args)
    assert res["failed"] and res["msg"] == "host n1: not launched: n2, n3 refused"
    assert res["released"] and not lease.exists()


def test_stop_on_an_unreachable_engine_fails_in_one_line(run_dir: Path) -> None:
    engine = {"executor": "docker", "docker_host": f"unix://{run_dir}/no-engine.sock", "host": "h1"}
    res, _ = module(
        "fleetperf_stop", run_dir.parent, run_dir=str(run_dir), reason="cleanup", **engine
    )
    assert res["failed"] and res["msg"].startswith("docker: ") and "\n" not in res["msg"]
    assert "Traceback" not in json.dumps(res) and not (run_dir / "stop_reason").exists()


def _pgrp(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError):
        return None


# ------------------------------------------------------------------------------ tail
def tail(run_dir: Path, **args: object) -> tuple[dict, float]:
    params = {"run_dir": str(run_dir), "wait": 10, "timeout_s": 600, "stall_s": 600}
    return module("fleetperf_tail", run_dir.parent, **{**params, **args})


def test_tail_holds_until_a_complete_line_and_then_returns_promptly(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    events = run_dir / "events.jsonl"
    events.write_text('{"kind": "start"}\n')
    first, _ = tail(run_dir)  # read already: the hold below starts past it
    assert first["lines"] == ['{"kind": "start"}']

    def writer() -> None:
        time.sleep(1.0)
        with events.open("a") as f:
            f.write('{"kind": "st')  # a line being written is no reason to return
            f.flush()
            time.sleep(1.0)
            f.write('ep"}\n')

    thread = threading.Thread(target=writer)
    thread.start()
    res, took = tail(run_dir)
    thread.join()
    assert res["lines"] == ['{"kind": "step"}'] and not res["finished"]
    assert 2.0 <= took < 4.0  # returned on the complete line, long before wait (10 s)
    assert res["cpu_s"] > 0 and float((run_dir / "poll_cpu_s").read_text()) == pytest.approx(
        first["cpu_s"] + res["cpu_s"], abs=1e-5
    )
    assert (run_dir / "heartbeat").exists()


def test_tail_spaces_returns_by_min_gap_and_batches_lines(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    events = run_dir / "events.jsonl"
    events.write_text("1\n")
    first, _ = tail(run_dir, min_gap=3)
    assert first["lines"] == ["1"]
    with events.open("a") as f:
        f.write("2\n3\n")
    second, took = tail(run_dir, min_gap=3)
    assert second["lines"] == ["2", "3"]
    assert took >= 2.0  # waited for the gap since the first return, then took both


def test_tail_returns_at_the_stall_deadline_and_on_exit(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    res, took = tail(run_dir, stall_s=2, wait=30, host="h2", rank=1)
    assert res["stalled"] and not res["finished"] and took < 5
    # A stall ends the caller's until and fails the host, its rank named.
    assert res["failed"] and res["msg"] == "host h2 rank 1: no event for 2 s (stalled)"
    (run_dir / "stderr.log").write_text("boom\n" * 1000 + "Traceback: the end\n")
    (run_dir / "exit_code").write_text("-9")
    res, took = tail(run_dir, wait=30, host="h2", rank=1)
    assert res["finished"] and res["exit_code"] == -9 and took < 5
    assert res["stderr_tail"].endswith("Traceback: the end\n")
    assert len(res["stderr_tail"]) == 2000  # the last 2,000 bytes, not the whole log
    assert res["failed"] and not res["done"]
    assert res["msg"] == (
        "host h2 rank 1: workload exited with code -9;"
        " stderr: boom | boom | boom | boom | Traceback: the end"
    )


def test_tail_reports_the_run_time_out_and_not_a_stall(run_dir: Path) -> None:
    pid_file = run_dir / "workload.pid"
    pid_file.write_text(NO_PID)
    started = time.time() - 10
    os.utime(pid_file, (started, started))  # launched 10 s ago
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')  # and an event just now
    res, took = tail(run_dir, timeout_s=5, stall_s=600, wait=30)
    assert res["timed_out"] and not res["stalled"] and not res["finished"]
    assert res["lines"] == ['{"kind": "step"}'] and took < 5
    res, took = tail(run_dir, timeout_s=600, stall_s=600, wait=1)
    assert not res["timed_out"] and not res["stalled"] and res["lines"] == []


def test_tail_is_finished_only_once_every_line_is_handed_back(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    lines = [json.dumps({"kind": "step", "step": i, "pad": "x" * 20}) for i in range(5)]
    (run_dir / "events.jsonl").write_text("".join(line + "\n" for line in lines))
    (run_dir / "exit_code").write_text("0")
    got, polls = [], []
    while not (polls and polls[-1]["finished"]):
        res, _ = tail(run_dir, max_bytes=len(lines[0]) * 2 + 2, wait=5)
        assert res["exit_code"] == 0
        polls.append(res)
        got += res["lines"]
        assert len(polls) <= len(lines), polls
    assert got == lines
    assert [len(p["lines"]) for p in polls] == [2, 2, 1]  # two lines fit max_bytes per poll
    assert [p["finished"] for p in polls] == [False, False, True]


def test_tail_of_a_workload_killed_mid_line_finishes(run_dir: Path) -> None:
    """A torn last line never completes: the run must still end, with the whole lines."""
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n{"kind": "st')
    (run_dir / "exit_code").write_text("-9")
    (run_dir / "stderr.log").write_text("Killed\n")
    res, took = tail(run_dir, wait=30)
    assert res["finished"] and res["lines"] == ['{"kind": "step"}'] and took < 5
    assert res["stderr_tail"] == "Killed\n"  # shorter than the tail: whole
    res, took = tail(run_dir, wait=30)
    assert res["finished"] and res["lines"] == [] and res["exit_code"] == -9


def test_tail_of_a_blank_last_line_finishes(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text("\n")
    (run_dir / "exit_code").write_text("0")
    res, took = tail(run_dir, wait=30)
    assert res["finished"] and res["lines"] == [] and took < 5


def test_tail_before_any_event_and_of_an_unreadable_exit(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    res, _ = tail(run_dir, wait=0.3)
    assert (res["lines"], res["events_bytes"], res["finished"]) == ([], 0, False)
    (run_dir / "exit_code").write_text("")  # the exit happened, its code is unknown
    res, _ = tail(run_dir, wait=5)
    assert res["finished"] and res["exit_code"] == -1
    for given in ({"timeout_s": 1, "stall_s": 1}, {"run_dir": str(run_dir), "timeout_s": 1},
                  {"run_dir": str(run_dir), "stall_s": 1}):  # fmt: skip
        missing, _ = module("fleetperf_tail", run_dir.parent, **given)
        absent = {"run_dir", "timeout_s", "stall_s"} - set(given)
        assert missing["failed"] and missing["msg"].endswith(", ".join(sorted(absent)))


def test_tail_in_check_mode_reads_without_moving_the_offset(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')
    for _ in range(2):  # the same line again: a dry run consumes nothing
        res, _ = tail(run_dir, wait=1, _ansible_check_mode=True)
        assert res["lines"] == ['{"kind": "step"}'] and not res.get("skipped")
    assert not (run_dir / "events.offset").exists()


def test_tail_beats_at_most_every_few_seconds(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    t0 = time.time()
    res, took = tail(run_dir, wait=2)
    assert took >= 2 and not res["lines"]
    beat = (run_dir / "heartbeat").stat().st_mtime
    assert beat - t0 < 1.5  # once when the hold began, not on every look at the files


def test_tail_returns_when_ansible_stops_reading(run_dir: Path) -> None:
    """Ansible gone (its end of our stdout closed): nobody wants the result; do not hold."""
    (run_dir / "workload.pid").write_text(NO_PID)
    args = run_dir.parent / "tail-gone.json"
    params = {"run_dir": str(run_dir), "wait": 60, "timeout_s": 600, "stall_s": 600}
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
    proc = subprocess.Popen(
        module_argv("fleetperf_tail", args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(1.5)  # holding
        t0 = time.monotonic()
        assert proc.stdout is not None
        proc.stdout.close()
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        proc.kill()
        proc.wait()


def test_tail_for_a_followed_host_waits_for_the_end_without_lines(run_dir: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    events = run_dir / "events.jsonl"
    events.write_text('{"kind": "start"}\n')

    def workload() -> None:
        time.sleep(1.0)
        with events.open("a") as f:
            f.write('{"kind": "result"}\n')  # lines do not end the hold: the exit does
        time.sleep(1.0)
        (run_dir / "exit_code").write_text("0")

    thread = threading.Thread(target=workload)
    thread.start()
    res, took = tail(run_dir, lines=False, wait=30)
    thread.join()
    assert 2.0 <= took < 4.0
    assert res["lines"] == [] and res["finished"] and res["exit_code"] == 0
    assert res["events_bytes"] == events.stat().st_size  # what the follower must have read
    assert not (run_dir / "events.offset").exists()  # the poll read nothing


def test_tail_releases_its_runs_lease_once_a_process_workload_ended(run_dir: Path) -> None:
    lease = run_dir.parent / "fleetperf.lease"
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text('{"kind": "start"}\n')
    res, _ = tail(run_dir, lines=False, wait=0.2, lease=str(lease))
    assert not res["finished"] and not res["released"] and lease.exists()  # still running
    (run_dir / "exit_code").write_text("1")
    lease.write_text(json.dumps({"run_id": "run-2"}))
    res, _ = tail(run_dir, lines=False, lease=str(lease))
    assert res["finished"] and not res["released"] and lease.exists()  # another run's
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    res, _ = tail(run_dir, lines=False, lease=str(lease))
    assert res["finished"] and res["released"] and not lease.exists()
    # A container's run: its stop removes the container, and releases the lease then (an
    # engine that cannot be asked fails the poll in one line).
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    engine = {"executor": "docker", "docker_host": f"unix://{run_dir}/no-engine.sock", "host": "h"}
    res, _ = tail(run_dir, lines=False, lease=str(lease), **engine)
    assert res["failed"] and res["msg"].startswith("host h: docker: ") and "\n" not in res["msg"]
    assert not res.get("released") and lease.exists()


# ------------------------------------------------------------------------------ preflight
def test_preflight_prepares_the_run_dir_and_refuses_what_is_missing(tmp_path: Path) -> None:
    res, _ = preflight(tmp_path, requires=["marker"])
    assert res["failed"]
    assert res["msg"] == (
        f"host h1: missing {tmp_path}/data/case/marker (stage it with: fleetperf prepare case"
        " --synthetic; for the real data, --from DIR in place of --synthetic)"
    )
    assert not (tmp_path / "runs" / "fleetperf.lease").exists()
    res, _ = preflight(tmp_path, min_free_gib=10**9)
    assert res["failed"] and res["msg"].startswith("host h1: only ")
    assert f"GiB free in {tmp_path}/runs, the run needs 1e+09 GiB" in res["msg"]
    res, _ = preflight(tmp_path, master_port=0)
    assert not res.get("failed") and res["master_port"] > 0
    assert json.loads((tmp_path / "runs" / "run-1" / "config.json").read_text()) == {
        "hp": {"steps": 1}
    }
    # The events file exists for the controller's follower before the launch: tail -F on a
    # missing file would poll once a second instead of using inotify.
    assert res["events"] == str(tmp_path / "runs" / "run-1" / "events.jsonl")
    assert Path(res["events"]).is_file() and Path(res["events"]).stat().st_size == 0
    assert 0 <= res["load_per_cpu"] < 1000 and res["synthetic_data"] is None  # no manifest
    for made in (True, False):
        manifest = tmp_path / "data" / "case" / "fleetperf-data.json"
        manifest.write_text(json.dumps({"synthetic": made, "source": None}))
        res, _ = preflight(tmp_path, run_root=str(tmp_path / f"runs-{made}"))  # own lease
        assert res["synthetic_data"] is made


def test_preflight_refuses_an_executor_it_does_not_serve_before_anything(tmp_path: Path) -> None:
    res, _ = preflight(tmp_path, executor="slurm")
    assert res["failed"] and res["msg"] == (
        "host h1: executor slurm is not supported here (process or docker; slurm runs"
        " through slurm.yml)"
    )
    assert not (tmp_path / "runs").exists()  # no run dir, no lease
    res, _ = preflight(tmp_path, executor="docker")
    assert not res.get("failed"), res


def test_preflight_names_a_process_host_without_its_python(tmp_path: Path) -> None:
    """run.yml passes "" where the inventory sets no fleetperf_python: one line, no lease."""
    res, _ = preflight(tmp_path, python="")
    assert res["failed"] and res["msg"].startswith("host h1: fleetperf_python is not set: ")
    assert not (tmp_path / "runs").exists()
    res, _ = preflight(tmp_path, python="", executor="docker")  # the image's python runs
    assert not res.get("failed"), res


def test_preflight_refuses_a_master_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        res, _ = preflight(tmp_path, master_port=port)
    assert res["failed"] and res["msg"] == f"host h1: master port {port} is in use"


def test_lease_refuses_waits_and_is_released(tmp_path: Path) -> None:
    res, _ = preflight(tmp_path, run_id="run-1")
    assert not res.get("failed"), res
    lease = json.loads((tmp_path / "runs" / "fleetperf.lease").read_text())
    assert lease["run_id"] == "run-1" and lease["controller"]["pid"] == os.getpid()

    res, took = preflight(tmp_path, run_id="run-2")
    assert res["failed"] and took < 5
    assert res["msg"].startswith("host h1: busy: run run-1 holds it (controller pid ")
    assert res["msg"].endswith("; use --wait SECONDS")

    res, took = preflight(tmp_path, run_id="run-2", lease_wait_s=2)
    assert res["failed"] and took >= 2 and res["msg"].endswith("; waited 2 s")

    def release_soon() -> None:
        time.sleep(1.5)
        module("fleetperf_stop", tmp_path, run_dir=str(tmp_path / "runs" / "run-1"),
               lease=str(tmp_path / "runs" / "fleetperf.lease"))  # fmt: skip

    thread = threading.Thread(target=release_soon)
    thread.start()
    res, took = preflight(tmp_path, run_id="run-2", lease_wait_s=30)
    thread.join()
    assert not res.get("failed"), res
    assert took >= 1.5
    assert json.loads((tmp_path / "runs" / "fleetperf.lease").read_text())["run_id"] == "run-2"


def test_a_lease_whose_controller_died_is_taken_over(tmp_path: Path) -> None:
    code = "import json; from dataclasses import asdict; from tui.core import liveness; "
    code += "print(json.dumps(asdict(liveness.this_controller())))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    gone = json.loads(dead.stdout)  # the lease of a controller that exited, as fleet sends it
    boot_id = gone["boot_id"]
    res, _ = preflight(tmp_path, run_id="run-1", controller=gone)
    assert not res.get("failed"), res
    res, _ = preflight(tmp_path, run_id="run-2", controller={**CONTROLLER, "boot_id": boot_id})
    assert not res.get("failed"), res
    assert json.loads((tmp_path / "runs" / "fleetperf.lease").read_text())["run_id"] == "run-2"


def test_stop_scan_skips_a_process_gone_mid_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # A process that exits between the listing of /proc and the read of its stat: the scan
    # goes on past it, so the workload's processes listed after it are still found.
    import ansible.module_utils as mu

    monkeypatch.setattr(mu, "__path__", [*mu.__path__, str(MODULE_UTILS)])
    # Ansible's module code replaces sys.intern, which breaks torch's compiler for any later
    # test in this worker: put the original back afterwards.
    monkeypatch.setattr(sys, "intern", sys.intern)
    from ansible.module_utils import fleetperf_stop_step

    listdir = os.listdir

    def listdir_with_one_gone(path: str) -> list[str]:
        return [NO_PID, *listdir(path)] if path == "/proc" else listdir(path)

    monkeypatch.setattr(os, "listdir", listdir_with_one_gone)
    procs = fleetperf_stop_step.processes()
    assert int(NO_PID) not in procs
    assert procs[os.getpid()] == (os.getppid(), os.getpgrp())


# ------------------------------------------------------------------------------ issue 18
# What a workload can do to the host-side code through its run directory (§4-6): links in
# place of its files, a pid that now names another process, racing preflights.
SECRET = "host secret: never in a result\n"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    """A file of the host's, outside every run dir: what a link may point at."""
    path = tmp_path / "host" / "secret"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.fixture
def bystander():
    """A process of nobody's run, in a session of its own; killed afterwards."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


# ------------------------------------------------------------------------------ links
def test_tail_reads_no_host_file_through_links(run_dir: Path, host_file: Path) -> None:
    (run_dir / "workload.pid").write_text(NO_PID)
    for name in ("events.jsonl", "stderr.log", "stop_reason", "exit_code"):
        (run_dir / name).symlink_to(host_file)
    host_file.write_text('{"kind": "step"}\n42\n')  # a line and an exit code, if followed
    res, took = tail(run_dir, wait=5)
    assert res["finished"] and took < 5  # exit_code is there, whatever it is
    assert res["lines"] == [] and res["events_bytes"] == 0
    assert (res["exit_code"], res["stderr_tail"], res["stop_reason"]) == (-1, None, None)
    assert host_file.read_text() == '{"kind": "step"}\n42\n'


def test_tail_and_stop_create_no_file_through_a_dangling_link(
    run_dir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("heartbeat", "events.offset", "poll_cpu_s", "stop_reason"):
        (run_dir / name).symlink_to(outside / name)
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')
    pid = launch(run_dir, "import time; time.sleep(600)")
    res, _ = tail(run_dir, wait=1)
    assert res["lines"] == ['{"kind": "step"}']
    res, _ = tail(run_dir, wait=0.5)  # nothing new: it holds, and beats
    assert res["lines"] == []
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), reason="test")
    assert res["msg"] == "stopped" and not alive(pid)
    assert list(outside.iterdir()) == []  # nothing made through the links
    for name in ("heartbeat", "events.offset", "poll_cpu_s", "stop_reason"):
        assert (run_dir / name).is_file() and not (run_dir / name).is_symlink()  # replaced
    assert (run_dir / "stop_reason").read_text() == "test"


def test_collect_snapshots_regular_files_only(run_dir: Path, host_file: Path) -> None:
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')
    (run_dir / "stderr.log").symlink_to(host_file)
    os.mkfifo(run_dir / "exit_code")  # a FIFO: opening it for reading must not block
    names = ["events.jsonl", "stderr.log", "exit_code", "config.json"]
    res, took = module("fleetperf_collect", run_dir.parent, run_dir=str(run_dir), files=names)
    assert took < 30 and res["files"] == ["events.jsonl"]
    assert res["skipped"] == ["stderr.log", "exit_code", "config.json"]
    snapshot = Path(res["dir"])
    assert snapshot.parent == run_dir.parent  # beside the run dir: no container sees it
    assert sorted(p.name for p in snapshot.iterdir()) == ["events.jsonl"]
    bad, _ = module("fleetperf_collect", run_dir.parent, run_dir=str(run_dir), files=["../x"])
    assert bad["failed"] and "'../x' is not a plain file name" in bad["msg"]


def test_collect_into_one_tar_file_that_the_controller_unpacks(
    run_dir: Path, host_file: Path, tmp_path: Path
) -> None:
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')
    (run_dir / "exit_code").write_text("0")
    (run_dir / "stderr.log").symlink_to(host_file)
    names = ["events.jsonl", "stderr.log", "exit_code"]
    args = {"run_dir": str(run_dir), "files": names, "archive": hostfiles.HOST_ARCHIVE}
    res, _ = module("fleetperf_collect", run_dir.parent, **args)
    assert res["files"] == ["events.jsonl", "exit_code"] and res["skipped"] == ["stderr.log"]
    assert sorted(p.name for p in Path(res["dir"]).iterdir()) == [res["archive"]]
    fetched = tmp_path / "fetched" / "h1"
    fetched.mkdir(parents=True)
    shutil.copy(Path(res["dir"]) / res["archive"], fetched / hostfiles.HOST_ARCHIVE)
    hostfiles.unpack_host_files(tmp_path / "fetched")
    assert sorted(p.name for p in fetched.iterdir()) == ["events.jsonl", "exit_code"]
    assert (fetched / "exit_code").read_text() == "0"
    bad, _ = module("fleetperf_collect", run_dir.parent, **{**args, "archive": "../x.tar"})
    assert bad["failed"] and "archive: '../x.tar' is not a plain file name" in bad["msg"]


def test_the_last_poll_brings_back_small_files_that_the_controller_unpacks(
    run_dir: Path, host_file: Path, tmp_path: Path
) -> None:
    """run.yml: the poll that releases the lease returns the run's files (no collect)."""
    lease = run_dir.parent / "fleetperf.lease"
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text('{"kind": "step"}\n')
    (run_dir / "stdout.log").write_text("x" * 1000)
    (run_dir / "stderr.log").symlink_to(host_file)
    names = ["events.jsonl", "stdout.log", "stderr.log", "exit_code"]
    limits = {"stdout.log": {"bytes": 10, "keep": "tail"}}
    args = {"lines": False, "lease": str(lease), "files": names, "limits": limits}
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    res, _ = tail(run_dir, wait=0.2, **args)
    assert not res["released"] and "files_tar" not in res  # still running: none yet
    (run_dir / "exit_code").write_text("0")
    res, _ = tail(run_dir, **args)
    assert res["released"] and res["files_tar"] and res["done"] and not res.get("failed")
    hostfiles.keep_polled_archive(tmp_path / "fetched", "h1", res["files_tar"])
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    got = tmp_path / "fetched" / "h1"
    assert sorted(p.name for p in got.iterdir()) == ["events.jsonl", "exit_code", "stdout.log"]
    assert (got / "stdout.log").read_text() == "x" * 10  # its limit, cut on the host
    assert notes == [
        "host h1: stdout.log was 1000 bytes; kept its tail 10 bytes, the limit"
        " (FLEETPERF_MAX_LOG_MIB)"
    ]
    # Too large for a poll's result: left to the collect (tasks/collect.yml).
    (run_dir / "events.jsonl").write_text("{}\n" * 200_000)
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    res, _ = tail(run_dir, **args)
    assert res["released"] and "files_tar" not in res and not res["done"]
    lease.write_text(json.dumps({"run_id": run_dir.name}))
    bad, _ = tail(run_dir, **{**args, "limits": {"stdout.log": {"bytes": -1, "keep": "tail"}}})
    assert bad["failed"] and bad["msg"].startswith("fleetperf_tail: limits.stdout.log: ")


def test_the_controller_unpacks_only_the_host_files_named(tmp_path: Path) -> None:
    """A tar file from a host is its workload's to shape: other names, links, paths out."""
    host = tmp_path / "fetched" / "h1"
    host.mkdir(parents=True)
    with tarfile.open(host / hostfiles.HOST_ARCHIVE, "w") as tar:
        for name, data in (("events.jsonl", b"{}\n"), ("../escape", b"x"), ("other", b"y")):
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        link = tarfile.TarInfo("stdout.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    hostfiles.unpack_host_files(tmp_path / "fetched")
    assert sorted(p.name for p in host.iterdir()) == ["events.jsonl"]
    assert not (tmp_path / "fetched" / "escape").exists()


def test_collect_of_a_run_dir_never_made_collects_nothing(tmp_path: Path) -> None:
    """A cleanup after a preflight that failed before the run dir (or its root) existed."""
    missing = tmp_path / "no-root" / "run-1"
    res, _ = module("fleetperf_collect", tmp_path, run_dir=str(missing), files=["stdout.log"])
    assert not res.get("failed"), res
    assert res["files"] == [] and res["skipped"] == ["stdout.log"] and "dir" not in res
    assert not (tmp_path / "no-root").exists()


def test_the_controllers_copy_follows_no_link(tmp_path: Path, host_file: Path) -> None:
    src = tmp_path / "runs" / "run-1"
    src.mkdir(parents=True)
    (src / "events.jsonl").write_text('{"kind": "step"}\n')
    (src / "stderr.log").symlink_to(host_file)
    os.mkfifo(src / "exit_code")
    hostfiles.copy_host_files({"h1": src}, tmp_path / "fetched")
    assert sorted(p.name for p in (tmp_path / "fetched" / "h1").iterdir()) == ["events.jsonl"]


@pytest.mark.slow  # one real playbook run (stop.yml, the fetch that follows the stop)
def test_the_plays_fetch_brings_back_no_host_file(tmp_path: Path, host_file: Path) -> None:
    from conftest import write_inventory

    results, run_id = tmp_path / "results", "run-1"
    host_run = results / "hosts" / "h1" / run_id
    host_run.mkdir(parents=True)
    (host_run / "events.jsonl").write_text('{"kind": "step"}\n')
    (host_run / "exit_code").write_text("0")
    (host_run / "stderr.log").symlink_to(host_file)
    hostvars = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "fleetperf_run_root": str(results / "hosts" / "h1"),
    }
    inventory = write_inventory(tmp_path / "inventory.yml", {"h1": hostvars})
    assert stop_run(run_id, ["h1"], inventory, results, tmp_path / "data")
    fetched = results / "runs" / run_id / "hosts" / "h1"
    assert sorted(p.name for p in fetched.iterdir()) == ["events.jsonl", "exit_code"]
    assert not list((results / "hosts" / "h1").glob(".collect-*"))  # the snapshot removed


# ------------------------------------------------------------------------------ identity
def test_stop_never_signals_a_pid_that_is_another_process_now(
    run_dir: Path, bystander: subprocess.Popen
) -> None:
    """The stored number now names an unrelated process (pid reuse): it survives."""
    pid = launch(run_dir, "import time; time.sleep(600)")
    launched = {"pid": pid, "boot_id": BOOT_ID, "start": start_ticks(pid)}
    os.killpg(pid, signal.SIGKILL)  # the workload gone, its exit never written ...
    (run_dir / "workload.pid").write_text(str(bystander.pid))  # ... and its number reused
    (run_dir / "workload.id").write_text(json.dumps({**launched, "pid": bystander.pid}))
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), grace=1)
    assert (res["changed"], res["msg"]) == (False, "gone") and "signal" not in res
    assert bystander.poll() is None
    (run_dir.parent / "run-2").mkdir()
    pid = launch(run_dir.parent / "run-2", "pass")  # what the launch records
    recorded = json.loads((run_dir.parent / "run-2" / "workload.id").read_text())
    assert (recorded["pid"], recorded["boot_id"]) == (pid, BOOT_ID) and recorded["start"] > 0


def test_a_pid_from_another_boot_is_neither_signalled_nor_busy(
    tmp_path: Path, bystander: subprocess.Popen
) -> None:
    """A pid recorded before a reboot: the stop leaves its process, and the host lease of
    its run (controller gone) is taken over instead of holding the host forever."""
    res, _ = preflight(tmp_path, run_id="run-1", controller={**CONTROLLER, "boot_id": "old"})
    assert not res.get("failed"), res
    run_dir = tmp_path / "runs" / "run-1"
    (run_dir / "workload.pid").write_text(str(bystander.pid))
    other_boot = str(uuid.uuid4())  # all but the boot id match
    ident = {"pid": bystander.pid, "boot_id": other_boot, "start": start_ticks(bystander.pid)}
    (run_dir / "workload.id").write_text(json.dumps(ident))
    old = time.time() - 3600
    os.utime(run_dir / "heartbeat", (old, old))
    res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), grace=1)
    assert res["msg"] == "gone" and bystander.poll() is None
    res, _ = preflight(tmp_path, run_id="run-2")
    assert not res.get("failed"), res


def test_a_running_workload_keeps_its_lease_and_exit_code_ends_stopping(
    tmp_path: Path,
) -> None:
    res, _ = preflight(tmp_path, run_id="run-1", controller={**CONTROLLER, "boot_id": "old"})
    run_dir = tmp_path / "runs" / "run-1"
    pid = launch(run_dir, "import time; time.sleep(600)")
    try:
        old = time.time() - 3600
        os.utime(run_dir / "heartbeat", (old, old))
        res, _ = preflight(tmp_path, run_id="run-2")
        assert res["failed"] and "busy: run run-1 holds it" in res["msg"]
        # exit_code there: nothing to signal, whatever still has the number
        (run_dir / "exit_code").write_text("0")
        res, _ = module("fleetperf_stop", run_dir.parent, run_dir=str(run_dir), grace=1)
        assert (res["changed"], res["msg"]) == (False, "finished") and alive(pid)
    finally:
        os.killpg(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------ lease
def _take(run_root: str, run_id: str, start: float, out: multiprocessing.Queue) -> None:
    """One preflight's lease take (the module's own code), at the same instant as the rest."""
    import ansible.module_utils as mu

    mu.__path__.append(str(MODULE_UTILS))
    from ansible.module_utils import fleetperf_preflight_step

    mine = {"run_id": run_id, "controller": CONTROLLER, "taken": time.time()}
    time.sleep(max(0.0, start - time.time()))
    out.put((run_id, fleetperf_preflight_step.try_take(run_root, mine, 60.0) is None))


@pytest.mark.slow  # racing controllers, seconds each
@pytest.mark.parametrize("lease", ["none", "stale"])
def test_of_racing_preflights_exactly_one_holds_the_host(tmp_path: Path, lease: str) -> None:
    ctx = multiprocessing.get_context("fork")
    takers, rounds = 6, 25
    for n in range(rounds):
        root = tmp_path / f"round-{n}"
        root.mkdir()
        if lease == "stale":  # a run whose controller died on this machine, long ago
            dead = {**CONTROLLER, "pid": 2**22 + 1, "boot_id": BOOT_ID}
            held = {"run_id": "dead", "controller": dead, "taken": 0}
            (root / "fleetperf.lease").write_text(json.dumps(held))
        out = ctx.Queue()
        start = time.time() + 0.5  # after every process has loaded the module
        procs = [
            ctx.Process(target=_take, args=(str(root), f"run-{i}", start, out))
            for i in range(takers)
        ]
        for p in procs:
            p.start()
        got = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        winners = [run_id for run_id, won in got if won]
        assert len(winners) == 1, f"round {n}: {winners} all hold the host"
        assert json.loads((root / "fleetperf.lease").read_text())["run_id"] == winners[0]


# ------------------------------------------------------------------------------ docker
@pytest.mark.slow  # a docker engine of the test's own, and a base image imported into it
def test_a_running_containers_lease_holds_after_the_heartbeat_ages(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from dockerd import Dockerd, missing

    if why := missing():
        pytest.skip(why)
    engine = Dockerd(tmp_path_factory.mktemp("engine"))  # short: containerd's socket path
    engine.start()
    try:
        base = "fleetperf-local/base:bookworm"
        made = subprocess.run(
            [sys.executable, str(Path(__file__).parents[2] / "scripts" / "make-base-image"),
             "--tag", base],
            env={**os.environ, "DOCKER_HOST": engine.host},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        gone = {"host": socket.gethostname(), "pid": 2**22 + 1, "boot_id": BOOT_ID}
        res, _ = preflight(tmp_path, run_id="run-1", controller=gone)  # controller dead
        assert not res.get("failed"), res
        run_dir = tmp_path / "runs" / "run-1"
        labels = ["--label", "fleetperf.run_id=run-1", "--label", "fleetperf.host=h1"]
        labels += ["--label", f"fleetperf.run_dir={run_dir}"]  # as the launch labels it
        engine.docker("run", "-d", "--network", "none", *labels, base, "sleep", "600")
        old = time.time() - 3600
        os.utime(run_dir / "heartbeat", (old, old))
        docker = {"executor": "docker", "docker_host": engine.host}
        res, _ = preflight(tmp_path, run_id="run-2", **docker)
        assert res["failed"] and "busy: run run-1 holds it" in res["msg"]
        stop = {"run_dir": str(run_dir), "grace": 1, "host": "h1", **docker}
        res, _ = module("fleetperf_stop", run_dir.parent, **stop)
        assert res["removed"] == 1
        res, _ = preflight(tmp_path, run_id="run-2", **docker)  # the container gone: stale now
        assert not res.get("failed"), res
    finally:
        engine.remove_containers()
        engine.stop()
        engine.remove_data()
