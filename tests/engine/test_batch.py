"""``fleetperf --batch`` end to end through real ansible-runner, on the torch-free emitter.

Every test launches real playbooks against the local inventory (or a temporary one),
so the whole path runs: preflight, launch, the poll loop, cleanup, fetch, the store.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shlex
import signal
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from conftest import Fleetperf, local_host, write_inventory
from process_guard import live_argvs

from tui.batch import ProgressPrinter
from tui.core.events import HostState, RunFinished, RunStarted


def pid_gone(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("zombie") >= 0


@pytest.mark.parametrize("reached", ["followed", pytest.param("polled", marks=pytest.mark.slow)])
def test_passing_run_streams_steps_and_stores_the_record(emitter: Fleetperf, reached: str) -> None:
    args: tuple[str, ...] = ()
    host = "localhost"
    if reached == "polled":  # a connection only a play can render: no follower, polls bring lines
        host = "polled"
        hostvars = {**local_host(emitter, host), "ansible_connection": "{{ 'local' }}"}
        inventory = write_inventory(emitter.results.parent / "polled.yml", {host: hostvars})
        args = ("-i", str(inventory))
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=12", "interval_s=0.3", args=args)
    assert out.returncode == 0, out.stdout + out.stderr
    steps = [ln for ln in out.stdout.splitlines() if ln.startswith(host) and " step " in ln]
    assert len(steps) == 12
    assert "loss 0.0833" in steps[-1] and "mem 0.10/1.0 GiB" in steps[-1]
    assert "| CPU单机单卡（1x1） | fp32 | steps=12,interval_s=0.3 |" in out.stdout
    (rec,) = emitter.records()
    assert rec["status"] == "passed" and rec["error"] is None
    assert rec["case"] == "emitter" and rec["config"] == "CPUx1x1" and rec["hosts"] == [host]
    assert rec["fix_hp"] == {"steps": 12, "interval_s": 0.3}
    assert rec["metrics"]["acc"] == 1.0 and rec["metrics"]["mfu"] is None
    assert rec["peak"] == {  # what MFU divides, from the result line to the record
        "chip": None,
        "math": "fp32",
        "datasheet_flops": None,
        "measured_flops": 1.0e11,
        "measured_mem_bw_bytes_per_s": 2.0e10,
        "model_flops_per_s_per_device": 5.0e9,
    }

    run_dir = emitter.results / "runs" / rec["run_id"]
    for name in ("events.jsonl", "stdout.log", "stderr.log", "exit_code", "config.json"):
        assert (run_dir / "hosts" / host / name).is_file(), name
    assert json.loads((run_dir / "result.json").read_text()) == rec
    assert json.loads((run_dir / "config.json").read_text())["hp"]["steps"] == 12
    # Workload -> controller latency, measured on the received step records.
    log = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    latencies = [r["received"] - r["t"] for r in log if r["type"] == "MetricSample"]
    assert len(latencies) == 12
    assert statistics.median(latencies) < 1.0
    # Each line came once, whoever read it; only the poll path keeps a read offset.
    assert sorted(r["step"] for r in log if r["type"] == "MetricSample") == list(range(1, 13))
    host_run = emitter.results / "hosts" / host / rec["run_id"]
    assert (host_run / "events.offset").exists() == (reached == "polled")


def _streaming(emitter: Fleetperf, setting: str, *needles: str) -> subprocess.Popen[str]:
    """A --batch run of the emitter with ``--set SETTING``, once it has printed a line that
    holds every needle (or ended)."""
    proc = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--set", setting
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if all(n in line for n in needles):
            break
    return proc


def _followers_under(root: Path) -> list[int]:
    """The `tail -F` followers (tui/core/stream.py) of files under root."""
    return [
        pid
        for pid, argv in live_argvs().items()
        if argv[:1] == [b"tail"] and any(a.startswith(str(root).encode()) for a in argv)
    ]


@pytest.mark.slow
def test_lines_a_dead_follower_missed_come_from_the_host_file(emitter: Fleetperf) -> None:
    proc = _streaming(emitter, "steps=12", " step      3 ")
    (follower,) = _followers_under(emitter.results)
    os.kill(follower, signal.SIGKILL)  # as an ssh follower whose connection dropped
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, rest + err
    (rec,) = emitter.records()
    assert rec["status"] == "passed" and rec["metrics"]["acc"] == 1.0
    log = emitter.results / "runs" / rec["run_id"] / "events.jsonl"
    steps = [json.loads(x) for x in log.read_text().splitlines()]
    assert sorted(r["step"] for r in steps if r["type"] == "MetricSample") == list(range(1, 13))


@pytest.mark.slow
def test_the_record_says_whether_the_data_was_synthetic(emitter: Fleetperf) -> None:
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=2")  # the fixture's hand-staged data
    assert out.returncode == 0, out.stdout + out.stderr
    assert "synthetic data" not in out.stdout
    prep = emitter.run("prepare", "emitter", "--synthetic")
    assert prep.returncode == 0, prep.stderr
    manifest = json.loads((emitter.data_root / "emitter" / "fleetperf-data.json").read_text())
    assert manifest["synthetic"] is True and manifest["source"] is None
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(synthetic data: fleetperf prepare --synthetic) |" in out.stdout  # status cell
    staged, synthetic = emitter.records()
    assert staged["synthetic_data"] is None and synthetic["synthetic_data"] is True
    # The host's own load, read by its preflight (also on a host that is not this machine).
    assert isinstance(synthetic["load_per_cpu"], float) and synthetic["load_per_cpu"] >= 0


def test_workload_failure_exits_1_with_its_message(emitter: Fleetperf) -> None:
    out = emitter.batch("emitter", "cpu/CPUx1x1", "fail_at_step=3")
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = emitter.records()
    assert rec["status"] == "failed"
    assert rec["error"] == "host localhost rank 0: planned failure at step 3"
    assert "failed: host localhost rank 0: planned failure" in out.stdout


def test_a_hosts_escape_sequences_are_shown_not_sent_to_the_terminal(emitter: Fleetperf) -> None:
    """A workload's error with a window-title OSC and a clear-screen CSI: the run's lines
    and its final table show them escaped; no raw ESC or BEL reaches the terminal."""
    script = emitter.cases_dir / "emitter" / "emitter.py"
    planned = 'message=f"planned failure at step {step}"'
    assert planned in script.read_text()
    hostile = r'message="[rank0]: \x1b]0;evil\x07 boom \x1b[2J"'
    script.write_text(script.read_text().replace(planned, hostile))
    out = emitter.batch("emitter", "cpu/CPUx1x1", "fail_at_step=2")
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = emitter.records()
    assert rec["error"] == "host localhost rank 0: [rank0]: \x1b]0;evil\x07 boom \x1b[2J"
    for stream in (out.stdout, out.stderr):
        assert "\x1b" not in stream and "\x07" not in stream
    shown = "[rank0]: \\u001b]0;evil\\u0007 boom \\u001b[2J"
    assert f"== failed: host localhost rank 0: {shown}" in out.stdout
    assert f"failed: host localhost rank 0: {shown}" in out.stdout.split("### emitter")[1]


def test_progress_lines_escape_control_codes_in_host_strings() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = ProgressPrinter(out, err)
    printer(HostState("r1", "node\x1b[2J", "failed", "\x9b31m red \x1b]0;evil\x07"))
    printer(RunFinished("r1", "bad_input", "no such file \x1b[1A", 0.0))
    line = out.getvalue()
    assert line.startswith("node\\u001b[2J ") and line.count("\n") == 1
    assert line.endswith(" FAILED: \\u009b31m red \\u001b]0;evil\\u0007\n")
    assert err.getvalue() == "fleetperf: error: no such file \\u001b[1A (nothing launched)\n"


def test_a_runs_lines_wait_for_its_launch() -> None:
    """Refused in preflight: the error alone, on stderr. Launched (queued: a Slurm job):
    the started line first, then what came before the launch, in order."""
    out, err = io.StringIO(), io.StringIO()
    printer = ProgressPrinter(out, err)
    printer(RunStarted("r1", "emitter", "cpu/CPUx1x2", ["a", "b"], 0.0))
    printer(HostState("r1", "a", "failed", "host a: missing /d/marker"))
    printer(RunFinished("r1", "bad_input", "host a: missing /d/marker", 0.0))
    assert out.getvalue() == ""
    assert err.getvalue() == "fleetperf: error: host a: missing /d/marker (nothing launched)\n"
    printer(RunStarted("r2", "emitter", "cpu/CPUx1x1", ["login"], 0.0))
    assert out.getvalue() == ""
    printer(HostState("r2", "login", "queued", "slurm job 7 submitted"))
    assert out.getvalue().splitlines() == [
        "== started emitter cpu/CPUx1x1 on login (run r2)",
        "login        queued: slurm job 7 submitted",
    ]


@pytest.mark.slow
def test_missed_target_is_a_failure_with_the_reason(emitter: Fleetperf) -> None:
    out = emitter.batch("emitter", "cpu/CPUx1x1", "converge=false")
    assert out.returncode == 1, out.stdout + out.stderr
    (rec,) = emitter.records()
    assert rec["status"] == "failed" and rec["error"] == "target acc 1.0 not reached"
    assert rec["metrics"]["p_core"] is not None  # the numbers are kept, marked failed


@pytest.mark.slow
def test_stalled_workload_is_stopped_and_reported(emitter: Fleetperf) -> None:
    case_yaml = emitter.cases_dir / "emitter" / "case.yaml"
    case_yaml.write_text(case_yaml.read_text().replace("stall_s: 30", "stall_s: 3"))
    t0 = time.monotonic()
    out = emitter.batch("emitter", "cpu/CPUx1x1", "hang_at_step=2", timeout=120)
    assert out.returncode == 1
    assert time.monotonic() - t0 < 60
    (rec,) = emitter.records()
    assert rec["status"] == "failed" and "no event for 3 s (stalled)" in rec["error"]
    (host_dir,) = emitter.host_dirs()
    assert pid_gone(host_dir / "workload.pid")


def test_missing_data_exits_2_and_launches_nothing(emitter: Fleetperf) -> None:
    (emitter.data_root / "emitter" / "marker").unlink()
    out = emitter.batch("emitter", "cpu/CPUx1x1")
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1
    assert f"host localhost: missing {emitter.data_root}/emitter/marker" in err[0]
    # FLEETPERF_DATA is the data root: the command needs no --data-root
    assert "(stage it with: fleetperf prepare emitter --synthetic; for the real data," in err[0]
    assert "nothing launched" in err[0]
    assert out.stdout == ""  # no "started" line, no run id: the run never was
    assert not any((d / "workload.pid").exists() for d in emitter.host_dirs())
    assert not (emitter.results / "fleetperf.sqlite").exists() or emitter.records() == []


@pytest.mark.slow
def test_the_refusals_command_stages_the_data_and_the_run_then_passes(emitter: Fleetperf) -> None:
    """Issue 29 point 3: a data root other than the default is named in the command, which
    is run as printed; the refused run then passes."""
    other = emitter.data_root.parent / "other-data"
    refused = emitter.batch("emitter", "cpu/CPUx1x1", args=("--data-root", str(other)))
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    assert "started" not in refused.stderr and "-emitter-" not in refused.stderr  # no run id
    command = refused.stderr.split("stage it with: ")[1].split(";")[0]
    assert command == f"fleetperf prepare emitter --synthetic --data-root {other}"
    staged = emitter.run(*shlex.split(command)[1:])
    assert staged.returncode == 0, staged.stderr
    again = emitter.batch("emitter", "cpu/CPUx1x1", args=("--data-root", str(other)))
    assert again.returncode == 0, again.stdout + again.stderr
    (rec,) = emitter.records()
    assert rec["status"] == "passed" and rec["synthetic_data"] is True
    assert f"(run {rec['run_id']})" in again.stdout.splitlines()[0]  # started, once launched


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_machine_formats_leave_stdout_to_the_table(emitter: Fleetperf, fmt: str) -> None:
    """Issue 29 point 1: ``--format json > out`` is parsed by a program; the progress
    (started, steps, the end) goes to stderr."""
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=3", args=("--format", fmt))
    assert out.returncode == 0, out.stdout + out.stderr
    (rec,) = emitter.records()
    if fmt == "json":
        (row,) = json.loads(out.stdout)
        assert row["run_id"] == rec["run_id"] and row["status"] == "passed"
    else:
        (row,) = csv.DictReader(io.StringIO(out.stdout))
        assert row["status"] == "passed"
    assert f"== started emitter cpu/CPUx1x1 on localhost (run {rec['run_id']})" in out.stderr
    assert "localhost    step      3" in out.stderr and "== passed" in out.stderr


def test_bad_input_exits_2_before_any_launch(emitter: Fleetperf) -> None:
    cases = [
        (["--case", "nope", "--config", "cpu/CPUx1x1"], "unknown case 'nope'"),
        (["--case", "emitter", "--config", "cpu/CPUx7x7"], "no config 'cpu/CPUx7x7'"),
        (
            ["--case", "emitter", "--config", "cpu/CPUx1x1", "--set", "steps=-1"],
            "--set: steps: must be at least 1 (got -1)",
        ),
        (
            ["--case", "emitter", "--config", "cpu/CPUx1x1", "--set", "precision=fp16"],
            "--set: precision: case emitter does not allow overriding it",
        ),
        (
            ["--case", "emitter", "--config", "cpu/CPUx1x1", "-i", "/nonexistent.yml"],
            "inventory /nonexistent.yml: no such file",
        ),
        (
            ["--case", "emitter", "--config", "cpu/CPUx2x1"],
            "group 'cpu' has 1 host(s), the config needs 2",
        ),
    ]
    for args, needle in cases:
        out = emitter.run("--batch", *args)
        assert out.returncode == 2, args
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, out.stderr)
        assert "Traceback" not in out.stderr
    assert not (emitter.results / "runs").exists()


def test_bad_config_file_exits_2_naming_file_and_field(emitter: Fleetperf) -> None:
    bad = emitter.cases_dir / "emitter" / "configs" / "cpu" / "CPUx1x4.yaml"
    bad.write_text("overrides:\n  steps: -1\n")
    out = emitter.batch("emitter", "cpu/CPUx1x4")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"fleetperf: error: {bad}: overrides.steps: must be at least 1 (got -1)"
    )


@pytest.mark.slow
def test_unreachable_host_exits_2_naming_it(emitter: Fleetperf, tmp_path: Path) -> None:
    inv = write_inventory(
        tmp_path / "inv.yml",
        {
            "localhost": local_host(emitter, "localhost"),
            "ghost": {
                "ansible_host": "127.0.0.1",
                "ansible_port": 9,
                "ansible_user": "nobody",
                "ansible_connection": "ssh",
                "fleetperf_run_root": "/tmp/unused",
            },
        },
    )
    out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(inv)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "ghost" in out.stderr and "nothing launched" in out.stderr
    assert not any((d / "workload.pid").exists() for d in emitter.host_dirs())


@pytest.mark.slow
def test_two_nodes_start_together_with_node_ranks(emitter: Fleetperf, tmp_path: Path) -> None:
    inv = write_inventory(
        tmp_path / "inv.yml",
        {
            "node1": local_host(emitter, "node1"),
            "node2": local_host(emitter, "node2"),
        },
    )
    out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(inv)))
    assert out.returncode == 0, out.stdout + out.stderr
    (rec,) = emitter.records()
    assert rec["hosts"] == ["node1", "node2"] and rec["config"] == "CPUx2x1"
    log = [
        json.loads(x)
        for x in (emitter.results / "runs" / rec["run_id"] / "events.jsonl")
        .read_text()
        .splitlines()
    ]
    steps = {(r["host"], r["rank"]) for r in log if r["type"] == "MetricSample"}
    assert steps == {("node1", 0), ("node2", 1)}  # node rank from the host's position
    assert [r["host"] for r in log if r["type"] == "CaseResult"] == ["node1"]


@pytest.mark.slow
def test_ctrl_c_aborts_stops_the_workload_and_records_it(emitter: Fleetperf) -> None:
    proc = _streaming(emitter, "hang_at_step=3", " step ", "samples")
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert rest.index("== stopping: cancelling the runs") < rest.index("localhost    stopped")
    assert "== aborted: aborted by the operator" in rest, rest + err
    (rec,) = emitter.records()
    assert rec["status"] == "aborted"
    (host_dir,) = emitter.host_dirs()
    assert pid_gone(host_dir / "workload.pid")


def rec_id(fp: Fleetperf) -> str:
    (run_dir,) = (fp.results / "runs").iterdir()
    return run_dir.name


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            out += [int(child), *_descendants(int(child))]
    return out


@pytest.mark.slow
def test_killed_controller_is_interrupted_then_cleaned_up(emitter: Fleetperf) -> None:
    proc = _streaming(emitter, "hang_at_step=3", " step ")
    # SIGKILL: the controller and what runs under it (ansible-playbook, the follower); the
    # workload (its own session, started by the launch module or, direct, by the
    # controller) keeps running on the host.
    (host_dir,) = emitter.host_dirs()
    workload = os.getsid(int((host_dir / "workload.pid").read_text()))
    for pid in [*reversed(_descendants(proc.pid)), proc.pid]:
        if os.getsid(pid) != workload:
            os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    try:
        _interrupted_then_cleaned(emitter, host_dir)
    finally:  # the workload's own process group, should the test fail before cleanup
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int((host_dir / "workload.pid").read_text()), signal.SIGKILL)


def _interrupted_then_cleaned(emitter: Fleetperf, host_dir: Path) -> None:
    assert not pid_gone(host_dir / "workload.pid")
    out = emitter.run("results", "--status", "all")
    assert f"run {rec_id(emitter)} (emitter cpu/CPUx1x1 on localhost) was interrupted" in out.stderr
    (rec,) = emitter.records()
    assert rec["status"] == "interrupted" and rec["finished"] is None

    out = emitter.run("cleanup")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"cleaned {rec['run_id']}: stopped on localhost" in out.stdout
    assert pid_gone(host_dir / "workload.pid")
    assert emitter.run("cleanup").stdout.strip() == "no interrupted runs to clean up"
    (rec,) = emitter.records()
    assert rec["status"] == "interrupted"


@pytest.mark.slow
def test_refused_run_leaves_no_run_directory(emitter: Fleetperf) -> None:
    (emitter.data_root / "emitter" / "marker").unlink()
    out = emitter.batch("emitter", "cpu/CPUx1x1")
    assert out.returncode == 2
    assert list((emitter.results / "runs").glob("*")) == []
    assert emitter.host_dirs() == []  # nor on the host
    assert emitter.records() == []


def test_a_reader_that_goes_away_leaves_the_run_to_its_record(emitter: Fleetperf) -> None:
    """`fleetperf --batch | head -1`: the pipe closes while the run streams; the run still
    ends as it would and is stored (it failed with an internal error from the printer's
    thread before), and nothing prints a traceback."""
    proc = emitter.popen("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # the run's first line, then the reader leaves
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err, err
    assert [r["status"] for r in emitter.records()] == ["passed"]
