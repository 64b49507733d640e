"""Two controllers never share a host: the host lease taken in preflight (issue 6 §3).

Two real ``fleetperf --batch`` commands on this machine's local inventory, sharing one
results directory (one store) and so one host run root and its lease.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from conftest import Fleetperf
from test_faults import kill_all, nothing_left, wait_streaming

pytestmark = pytest.mark.slow  # real runs over SSH test hosts, minutes each


@pytest.fixture
def first_run(emitter: Fleetperf) -> Iterator[subprocess.Popen[str]]:
    """A run holding localhost, streaming; killed with its workload if a test leaves it."""
    proc = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1",
        "--set", "steps=600", "--set", "interval_s=0.2",
    )  # fmt: skip
    try:
        wait_streaming(proc, {"localhost"})
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
        kill_all([emitter.results / "hosts" / "localhost"])


def test_a_second_batch_on_a_held_host_is_refused_naming_the_holder(
    emitter: Fleetperf, first_run: subprocess.Popen[str]
) -> None:
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=2")
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "host localhost: busy: run " in line
    assert f"holds it (controller pid {first_run.pid} on " in line
    assert "; use --wait SECONDS" in line
    first_run.send_signal(signal.SIGINT)
    rest, _ = first_run.communicate(timeout=120)
    (rec,) = emitter.records()  # the refused run kept nothing; the first is intact
    assert rec["status"] == "aborted" and f"run {rec['run_id']} holds it" in line
    assert nothing_left([emitter.results / "hosts" / "localhost"])


def test_a_second_batch_with_wait_runs_after_the_first(
    emitter: Fleetperf, first_run: subprocess.Popen[str]
) -> None:
    hosts = emitter.results / "hosts" / "localhost"
    second = emitter.popen(
        "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--set", "steps=2",
        "--wait", "300",
    )  # fmt: skip
    try:
        time.sleep(15)  # long enough for its preflight to have run even on a busy host
        assert second.poll() is None  # still waiting for the host
        assert len(list(hosts.glob("*/workload.pid"))) == 1  # and launched nothing
        first_run.send_signal(signal.SIGINT)
        first_run.communicate(timeout=120)
        out, err = second.communicate(timeout=300)
    finally:
        if second.poll() is None:
            second.kill()
            second.communicate(timeout=60)
    assert second.returncode == 0, out + err
    # Both may start in the same second (the record's times are to the second): by steps.
    records = {r["fix_hp"]["steps"]: r for r in emitter.records()}
    assert {steps: r["status"] for steps, r in records.items()} == {600: "aborted", 2: "passed"}
    assert records[600]["finished"] <= records[2]["finished"]
    assert nothing_left([hosts])
