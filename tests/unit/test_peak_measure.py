"""Measured peak: calibrated matmul and copy rates on this CPU, the cache, ``fleetperf peak``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness import peak_cache, peakmeter  # noqa: E402

pytestmark = pytest.mark.xdist_group(__name__)  # one worker: module fixtures built once


@pytest.fixture(scope="module")
def cpu_device():
    import torch

    try:
        yield harness.open_device("cpu", "fp32")
    finally:
        torch.set_flush_denormal(False)  # open_device set it for the process


@pytest.fixture(scope="module")
def measured(cpu_device, tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("root") / "peaks.json"
    t0 = time.perf_counter()
    entry = peakmeter.lookup_or_measure(cpu_device, "fp32", path, load=lambda: 0.5)
    entry["_wall"] = time.perf_counter() - t0
    return path, entry


def test_measurement_is_short_and_cached(measured, cpu_device):
    import torch

    path, entry = measured
    assert entry["_wall"] < 15.0  # about 1.5 s on an idle 2-core host; loose for busy ones
    assert entry["host"] == socket.gethostname()
    assert entry["device"] == f"{cpu_device.name} [torch threads: {torch.get_num_threads()}]"
    assert entry["math"] == "fp32" and entry["torch"] == torch.__version__
    side = entry["matmul_n"]
    assert 256 <= side <= peakmeter.MAX_SIDE["cpu"] and side & (side - 1) == 0
    assert 1e8 < entry["matmul_flops"] < 1e14 and 1e8 < entry["mem_bw_bytes_per_s"] < 1e13
    (cached,) = peak_cache.read_entries(path).values()
    assert cached == {k: v for k, v in entry.items() if k != "_wall"}
    # a second lookup reads the file, it does not measure again
    again = peakmeter.lookup_or_measure(cpu_device, "fp32", path, load=lambda: 0.5)
    assert again["measured_at"] == entry["measured_at"]


def test_a_peak_measured_on_a_busy_host_is_not_cached(cpu_device, tmp_path):
    path = tmp_path / "peaks.json"
    busy = peakmeter.LOADED_PER_CPU + 1
    entry = peakmeter.lookup_or_measure(cpu_device, "fp32", path, load=lambda: busy)
    assert entry["cached"] is False and entry["load_per_cpu"] == busy
    assert entry["matmul_flops"] > 0 and not path.exists()


def test_calibration_keeps_the_least_disturbed_block():
    """Blocks are timed separately and the best one counts: a block slowed by other load
    (here: every call of the second block sleeps 10x longer) does not lower the rate."""
    calls = []

    def run() -> None:
        calls.append(None)
        block = (len(calls) - 1) // reps
        time.sleep(0.02 if block == 1 else 0.002)

    reps = 4  # budget / BLOCKS / one call's time
    rate = peakmeter._best_rate(1.0, run, lambda: None, budget=4 * 5 * 0.002, one_s=0.002)
    assert len(calls) == peakmeter.BLOCKS * reps
    assert 1 / 0.015 < rate <= 1 / 0.002  # a fast block: 2 ms a call plus sleep overshoot


def test_another_math_mode_is_another_entry(measured, cpu_device):
    path, _ = measured
    peakmeter.lookup_or_measure(cpu_device, "bf16", path, load=lambda: 0.5)
    entries = peak_cache.read_entries(path)
    assert sorted(e["math"] for e in entries.values()) == ["bf16", "fp32"]


def test_corrupt_cache_is_rebuilt_not_fatal(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text("{ not json")
    with pytest.raises(ValueError, match=str(path)):
        peak_cache.read_entries(path)
    entry = {"host": "h", "device": "d", "math": "fp32", "matmul_flops": 1e9}
    peak_cache.write_entry(path, entry)
    assert peak_cache.read_entries(path) == {"h|d|fp32": entry}
    assert [p.name for p in tmp_path.iterdir()] == ["peaks.json"]  # no temp file left


def test_cache_location(tmp_path, monkeypatch):
    monkeypatch.delenv(peak_cache.ENV_VAR, raising=False)
    assert peak_cache.cache_path(tmp_path) == tmp_path / "peaks.json"
    monkeypatch.setenv(peak_cache.ENV_VAR, str(tmp_path / "elsewhere.json"))
    assert peak_cache.cache_path(tmp_path) == tmp_path / "elsewhere.json"


def _fleetperf_peak(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != peak_cache.ENV_VAR}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "peak", *args],
        cwd=REPO,
        env={**environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_fleetperf_peak_prints_the_cache(measured, tmp_path):
    path, entry = measured
    proc = _fleetperf_peak("--data-root", str(path.parent))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{path}:"
    row = next(line for line in lines if "fp32" in line)
    assert entry["device"] in row and f"{entry['matmul_flops'] / 1e12:.3f}" in row

    empty = _fleetperf_peak("--data-root", str(tmp_path))
    assert empty.returncode == 0 and "no measured peaks" in empty.stdout

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1}))
    proc = _fleetperf_peak(env={peak_cache.ENV_VAR: str(bad)})
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_controller_side_modules_import_no_torch():
    code = (
        "import sys, harness, harness.vendors, harness.peak_cache, harness.metrics;"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "cases")}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
