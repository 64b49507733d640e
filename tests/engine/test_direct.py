"""The direct executor (tui/executors/direct.py) against the play: one local run through
both, the same record. The direct path is the local default, so the engine's other tests
(stall, failure, Ctrl-C, a killed controller and its cleanup, the lease) run on it; here
each way is named, and the run dir shows which ran (only the play leaves ansible's)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from test_faults import nothing_left, wait_streaming

from tui.executors import direct

# Differ from run to run whichever way ran: ids, times, what the workload measured, the
# host's load, and the verdict (the second run has the first in its history).
PER_RUN = {
    "run_id", "batch_id", "started", "finished", "metrics", "load_per_cpu", "run_dir",
    "controller", "verdict", "environment", "peak", "monitoring",
}  # fmt: skip


def _run(
    emitter: Fleetperf, monkeypatch: pytest.MonkeyPatch, way: str, *sets: str
) -> tuple[int, dict, set[str]]:
    """A batch the given way: its exit code, its record, the event types it logged."""
    before = {r["run_id"] for r in emitter.records()} if emitter.results.exists() else set()
    monkeypatch.setenv("FLEETPERF_DIRECT", "0" if way == "play" else "1")
    out = emitter.batch("emitter", "cpu/CPUx1x1", *sets)
    (rec,) = [r for r in emitter.records() if r["run_id"] not in before]
    run_dir = emitter.results / "runs" / str(rec["run_id"])
    assert (run_dir / "ansible-run").exists() == (way == "play"), f"not run the {way} way"
    logged = {json.loads(line)["type"] for line in (run_dir / "events.jsonl").open()}
    return out.returncode, rec, logged


def _kept(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in PER_RUN}


def test_a_local_run_keeps_the_same_record_through_the_play_and_direct(
    emitter: Fleetperf, monkeypatch: pytest.MonkeyPatch
) -> None:
    rc_play, play, logged_play = _run(emitter, monkeypatch, "play")
    rc_direct, direct, logged_direct = _run(emitter, monkeypatch, "direct")
    assert (rc_play, rc_direct) == (0, 0)
    assert _kept(direct) == _kept(play)
    assert direct["status"] == "passed" and direct["hosts"] == ["localhost"]
    assert set(direct["metrics"]) == set(play["metrics"]) and direct["metrics"]["p_core"] > 0
    assert set(direct["verdict"]) == set(play["verdict"])
    assert logged_direct == logged_play == {"WorkloadStarted", "MetricSample", "CaseResult"}


@pytest.mark.parametrize("way", ["play", "direct"])
def test_a_crashed_workload_fails_with_its_exit_code_and_stderr_either_way(
    emitter: Fleetperf, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    # No error event: the workload dies; the run's message is the poll's exit code and the
    # end of stderr, as run.yml's check words it.
    entry = emitter.cases_dir / "emitter" / "emitter.py"
    entry.write_text("import sys\nsys.stderr.write('first\\nboom: out of luck\\n')\nsys.exit(3)\n")
    rc, rec, _ = _run(emitter, monkeypatch, way)
    assert rc == 1
    assert rec["status"] == "failed"
    assert rec["error"] == (
        "host localhost rank 0: workload exited with code 3; stderr: first | boom: out of luck"
    )


def test_a_bad_direct_setting_is_refused_before_any_launch(
    emitter: Fleetperf, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETPERF_DIRECT", "yes")
    out = emitter.batch("emitter", "cpu/CPUx1x1")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "FLEETPERF_DIRECT='yes': expected 0" in line
    assert not list(emitter.results.glob("runs/*"))


@pytest.mark.slow  # two real batches, one waiting for the other's lease
def test_ctrl_c_ends_a_direct_runs_wait_for_the_lease_at_once(emitter: Fleetperf) -> None:
    # The play's watcher kills ansible-playbook mid-preflight; the direct path's preflight
    # stops waiting itself.
    first = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1",
        "--set", "steps=600", "--set", "interval_s=0.2",
    )  # fmt: skip
    second = None
    try:
        wait_streaming(first, {"localhost"})
        second = emitter.popen(
            "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--wait", "300"
        )
        time.sleep(5)  # in its preflight, waiting for the lease
        assert second.poll() is None
        t0 = time.monotonic()
        second.send_signal(signal.SIGINT)
        second.communicate(timeout=60)
        assert time.monotonic() - t0 < 10 and second.returncode != 0
        assert first.poll() is None  # the holder runs on
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=120)
    runs = emitter.results / "hosts" / "localhost"
    assert len(list(runs.glob("*/workload.pid"))) == 1  # the second launched nothing
    assert nothing_left([runs])


LOCAL = {
    "ansible_connection": "local",
    "fleetperf_executor": "process",
    "fleetperf_repo_dir": "{{ fleetperf_controller_root | default(inventory_dir ~ '/..') }}",
    "fleetperf_python": "{{ fleetperf_controller_python | default(ansible_playbook_python) }}",
    "fleetperf_data_root": "/srv/data",
    "fleetperf_run_root": "{{ fleetperf_controller_results }}/hosts/{{ inventory_hostname }}",
}
HERE = {
    "fleetperf_controller_root": "/repo",
    "fleetperf_controller_python": "/repo/.venv/bin/python",
    "fleetperf_controller_data_root": "/srv/data",
    "fleetperf_controller_results": "/srv/results",
}


def test_the_rule_renders_a_local_hosts_vars_from_the_controllers() -> None:
    found = direct.local_vars("box", LOCAL, Path("/inv/local.yml"), HERE)
    assert found == {
        "fleetperf_run_root": "/srv/results/hosts/box",
        "fleetperf_data_root": "/srv/data",
        "fleetperf_repo_dir": "/repo",
        "fleetperf_python": "/repo/.venv/bin/python",
    }


@pytest.mark.parametrize(
    "change",
    [
        {"ansible_connection": "ssh"},
        {"ansible_become": True},
        {"fleetperf_run_root": "{{ hostvars['other'].fleetperf_run_root }}"},  # a play's
        {"fleetperf_python": "{{ '/usr/bin/python3' | ansible.builtin.dirname }}"},
        {"fleetperf_workload_env": {"HF_TOKEN": {"__ansible_vault": "$ANSIBLE_VAULT;1.1"}}},
        {"fleetperf_python": ""},
    ],
)
def test_a_host_the_controller_cannot_render_alone_goes_through_the_play(change: dict) -> None:
    assert direct.local_vars("box", {**LOCAL, **change}, Path("/inv/local.yml"), HERE) is None


END = """
import atexit, pathlib, sys, threading
from tui.batch import end_process
atexit.register(pathlib.Path(sys.argv[1]).write_text, "handlers ran")
if sys.argv[2] == "thread":  # a thread a normal exit waits for: the ordinary exit follows
    threading.Thread(target=threading.Event().wait, args=(0.5,)).start()
if sys.argv[2] == "profiled":  # python -m cProfile writes its data after main returns
    sys.setprofile(lambda *_: None)
print("table", end="")  # buffered: stdout is a pipe
sys.exit(10 + end_process(3))
"""


@pytest.mark.parametrize("thread", ["none", "thread", "profiled"])
def test_a_batch_ends_its_process_with_the_output_and_exit_handlers_kept(
    tmp_path: Path, thread: str
) -> None:
    """end_process skips the interpreter's teardown, not the output or the exit handlers."""
    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-c", END, str(marker), thread],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        3 if thread == "none" else 13,
        "table",
        "",
    )
    assert marker.read_text() == "handlers ran"
