"""The energy and monitoring tables of a real CPU run: its workload's sys samples reach the
record through the engine, and ``--batch`` and ``fleetperf results RUN_ID`` print them."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, Fleetperf


def test_a_cpu_base_run_records_and_prints_its_energy_and_monitoring(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    out = fp.batch("base-memory-bandwidth", "cpu/CPUx1x1", "iterations=5")
    assert out.returncode == 0, out.stdout + out.stderr
    (rec,) = fp.records()
    summary = rec["monitoring"]
    (host,) = summary["hosts"]
    assert host["host"] == "localhost" and host["samples"] >= 1
    # psutil is in the workload's environment: host CPU and memory use are measured.
    assert 0 <= host["cpu_percent"]["avg"] <= host["cpu_percent"]["max"] <= 100
    assert 0 < host["host_mem_percent"]["avg"] < 100 and host["host_mem_total_gib"] > 0
    assert host["devices"] == []  # a CPU host: no NVML
    assert any(n.startswith("host localhost: no device readings") for n in summary["notes"])

    short = rec["run_id"].rsplit("-", 1)[-1][:6]
    shown = out.stdout.split(f"#### base-memory-bandwidth cpu/CPUx1x1 run {short}\n", 1)[1]
    energy = "| host | item | average power (W) | max power (W) | power std (W) | TDP (W) |"
    assert shown.startswith("energy and monitoring (1 host(s); localhost: ")
    # --batch (issue 41 point 9): what was measured, one line for what was not; no column
    # or row without a figure, no notes (fleetperf results RUN says why).
    cpu = f"{host['cpu_percent']['avg']:.1f} | {host['host_mem_percent']['avg']:.1f}"
    block = shown.split("\n\n\n", 1)[0].rstrip("\n").splitlines()
    measured = "| host | item | average CPU use (%) | average memory use (%) |"
    assert measured in block and f"| localhost | system | {cpu} |" in block
    assert "—" not in shown and "  - " not in shown
    assert block[-1].startswith("not measured: ")
    assert (
        "device readings, system TDP" in block[-1]
        and f"(fleetperf results {short} says why)" in block[-1]
    )
    assert ("CPU power" in block[-1]) == (host["cpu_power_w"] is None)
    assert len(block) <= 12

    detail = fp.run("results", rec["run_id"])  # the whole tables, with their notes
    assert detail.returncode == 0, detail.stderr
    assert energy in detail.stdout and f"| localhost | system | {cpu} |  |" in detail.stdout
    assert "host localhost: no device readings" in detail.stdout
