"""The energy and monitoring summary of a run's sys samples (tui/results/monitoring.py):
its maths against hand computations, the nulls and their notes, and the tables' cells."""

from __future__ import annotations

import math
import threading

import pytest

from tui.core.events import SysSample
from tui.results.monitoring import UNKNOWN, Monitor, Stats
from tui.results.monitoring_tables import (
    ENERGY_HEADER,
    MONITORING_HEADER,
    energy_table,
    monitoring_table,
)
from tui.results.record import RunRecord
from tui.results.tables import monitoring_text


def sample(host: str, t: float, **values: float) -> SysSample:
    return SysSample("run-1", host, 0, t, {k: float(v) for k, v in values.items()})


def gpu(d: int, power: float, temp: float, used: float, total: float = 80.0) -> dict[str, float]:
    return {
        f"dev{d}_power_w": power,
        f"dev{d}_power_limit_w": 400.0,
        f"dev{d}_temp_c": temp,
        f"dev{d}_mem_used_gib": used,
        f"dev{d}_mem_total_gib": total,
        f"dev{d}_util": 90.0,
        f"dev{d}_sm_clock_mhz": 1980.0,
        f"dev{d}_mem_clock_mhz": 2619.0,
        f"dev{d}_throttle_thermal": 0.0,
        f"dev{d}_throttle_power_cap": 0.0,
        f"dev{d}_throttle_hw_slowdown": 0.0,
    }


def test_no_sample_is_no_summary() -> None:
    assert Monitor("cpu", 1).summary() is None
    assert Stats().summary() is None


def test_average_max_and_population_std_by_hand() -> None:
    m = Monitor("nvidia", 2)
    # Three samples 5 s apart on one host with two devices; RAPL on.
    for i, (cpu, rapl, p0, p1) in enumerate(
        [(10, 150, 100, 300), (20, 200, 200, 300), (60, 250, 300, 300)]
    ):
        m.add(
            sample(
                "h1",
                1000.0 + 5 * i,
                cpu_percent=cpu,
                host_mem_used_gib=4 * (i + 1),
                host_mem_total_gib=16,
                cpu_power_w=rapl,
                cpu_freq_mhz=2400,
                others_cpu_s=0.1 * i,
                window_s=5.0 * i,
                host_cpus=8,
                **gpu(0, p0, 50 + i, 8 * (i + 1)),
                **gpu(1, p1, 60, 40),
            )
        )
    (host,) = m.summary()["hosts"]
    assert host["host"] == "h1" and host["samples"] == 3 and host["seconds"] == 10.0
    # cpu 10, 20, 60: mean 30; deviations -20, -10, 30: variance (400+100+900)/3.
    assert host["cpu_percent"] == pytest.approx({"avg": 30, "max": 60, "std": math.sqrt(1400 / 3)})
    # host memory 4, 8, 12 of 16 GiB: 25, 50, 75 %.
    assert host["host_mem_percent"] == pytest.approx(
        {"avg": 50, "max": 75, "std": math.sqrt(1250 / 3)}
    )
    assert host["host_mem_total_gib"] == 16
    assert host["cpu_power_w"] == pytest.approx(
        {"avg": 200, "max": 250, "std": math.sqrt(5000 / 3)}
    )
    dev0, dev1 = host["devices"]
    assert dev0["device"] == 0 and dev1["device"] == 1
    assert dev0["power_w"] == pytest.approx({"avg": 200, "max": 300, "std": math.sqrt(20000 / 3)})
    assert dev0["temp_c"] == pytest.approx({"avg": 51, "max": 52, "std": math.sqrt(2 / 3)})
    # 8, 16, 24 of 80 GiB: 10, 20, 30 %.
    assert dev0["mem_percent"] == pytest.approx({"avg": 20, "max": 30, "std": math.sqrt(200 / 3)})
    assert dev0["mem_used_gib"] == pytest.approx({"avg": 16, "max": 24, "std": math.sqrt(128 / 3)})
    assert dev0["util"] == {"avg": 90, "max": 90, "std": 0}
    assert dev0["power_limit_w"] == 400 and dev0["mem_total_gib"] == 80
    assert dev1["power_w"] == {"avg": 300, "max": 300, "std": 0}
    assert dev1["mem_percent"] == {"avg": 50, "max": 50, "std": 0}
    notes = m.summary()["notes"]
    assert not [n for n in notes if n.startswith("host h1")]  # nothing lacking
    assert any("RAPL figure" in n and "not the whole system" in n for n in notes)
    assert any(n.startswith("system TDP: not read") for n in notes)


def test_a_host_without_nvml_or_rapl_has_nulls_each_with_its_note() -> None:
    m = Monitor("cpu", 2)
    m.add(sample("c1", 0.0, cpu_percent=50, host_mem_used_gib=2, host_mem_total_gib=8))
    (host,) = m.summary()["hosts"]
    assert host["cpu_percent"] == {"avg": 50, "max": 50, "std": 0}  # one sample: std 0
    assert host["seconds"] == 0.0
    assert host["cpu_power_w"] is None and host["devices"] == []
    notes = m.summary()["notes"]
    assert (
        "host c1: no CPU power: the samples carry none"
        " (RAPL not readable there: most VMs, or root only)"
    ) in notes
    assert (
        "host c1: no device readings: only NVML (nvidia) and ixsmi (iluvatar) are read, and"
        " this vendor cpu host gave none"
    ) in notes
    assert not any("RAPL figure" in n for n in notes)  # no system power shown: nothing to qualify
    assert energy_table(m.summary()) == [["c1", "system (CPU packages)", *[UNKNOWN] * 4]]
    assert monitoring_table(m.summary()) == [["c1", "system", "50.0", "25.0", ""]]


def test_without_psutil_cpu_and_memory_are_null_with_a_note() -> None:
    m = Monitor("cpu", 1)
    m.add(sample("c1", 0.0, host_mem_total_gib=8))  # the sampler's fallback: the total alone
    (host,) = m.summary()["hosts"]
    assert host["cpu_percent"] is None and host["host_mem_percent"] is None
    assert host["host_mem_total_gib"] == 8
    notes = m.summary()["notes"]
    assert "host c1: no CPU use: the samples carry none (psutil not importable there)" in notes
    assert (
        "host c1: no host memory use: the samples carry none (psutil not importable there)" in notes
    )


def test_two_hosts_a_missing_tdp_and_a_device_that_said_nothing() -> None:
    m = Monitor("nvidia", 2)
    for t in (0.0, 5.0):
        readings = gpu(0, 250, 70, 10)
        del readings["dev0_power_limit_w"]  # a board that gives no default limit
        m.add(sample("a", t, cpu_percent=5, **readings))
        m.add(sample("b", t + 1, cpu_percent=15, **gpu(0, 100, 40, 1), **gpu(1, 120, 45, 2)))
    a, b = m.summary()["hosts"]
    assert (a["host"], b["host"]) == ("a", "b")
    assert a["devices"][0]["power_limit_w"] is None
    assert a["devices"][1] == {
        "device": 1,
        "power_w": None,
        "temp_c": None,
        "mem_percent": None,
        "mem_used_gib": None,
        "util": None,
        "sm_clock_mhz": None,
        "mem_clock_mhz": None,
        "power_limit_w": None,
        "mem_total_gib": None,
        "throttle": None,
    }
    notes = m.summary()["notes"]
    assert "host a device 0: no TDP (NVML gave no default power limit)" in notes
    assert (
        "host a device 1: no power, TDP (NVML gave no default power limit), temperature,"
        " memory use, utilisation"
    ) in notes
    assert not [n for n in notes if n.startswith("host b device")]
    energy = energy_table(m.summary())
    assert energy == [
        ["a", "system (CPU packages)", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN],
        ["a", "device 0", "250.0", "250.0", "0.0", UNKNOWN],
        ["a", "device 1", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN],
        ["b", "system (CPU packages)", UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN],
        ["b", "device 0", "100.0", "100.0", "0.0", "400.0"],
        ["b", "device 1", "120.0", "120.0", "0.0", "400.0"],
    ]
    assert all(len(row) == len(ENERGY_HEADER) for row in energy)
    assert monitoring_table(m.summary())[-1] == ["b", "device 1", "", "2.5", "45.0"]
    assert all(len(row) == len(MONITORING_HEADER) for row in monitoring_table(m.summary()))


def test_devices_past_the_nodes_count_and_unknown_keys_are_not_kept() -> None:
    m = Monitor("nvidia", 1)
    m.add(sample("h", 0.0, cpu_percent=1, dev0_power_w=10, dev1_power_w=99, dev0_fan=3, busy=1))
    (host,) = m.summary()["hosts"]
    assert [d["device"] for d in host["devices"]] == [0]
    assert host["devices"][0]["power_w"] == {"avg": 10, "max": 10, "std": 0}


def test_readings_too_large_to_sum_are_null_with_a_note() -> None:
    m = Monitor("cpu", 1)
    m.add(sample("h", 0.0, cpu_percent=-1e308))
    m.add(sample("h", 1.0, cpu_percent=1e308))
    (host,) = m.summary()["hosts"]
    assert host["cpu_percent"] is None
    assert "host h: no CPU use: its readings are too large to summarise" in m.summary()["notes"]


def test_the_running_figures_match_a_two_pass_computation_over_many_samples() -> None:
    m = Monitor("cpu", 1)
    values = [(i * 37 % 101) / 3 for i in range(5000)]
    threads = [
        threading.Thread(
            target=lambda part=values[k::4]: [m.add(sample("h", 0.0, cpu_percent=v)) for v in part]
        )
        for k in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    (host,) = m.summary()["hosts"]
    assert host["samples"] == 5000
    assert host["cpu_percent"] == pytest.approx({"avg": mean, "max": max(values), "std": std})


def test_the_text_tables_of_a_record() -> None:
    m = Monitor("nvidia", 1)
    m.add(sample("h|1", 0.0, cpu_percent=12.25, **gpu(0, 253.4, 52.8, 1.5)))
    record = RunRecord(
        run_id="20261121-193000-base-x-3fa2c01d9e4b7a65",
        case="base-x",
        vendor="nvidia",
        config="A100x1x1",
        status="passed",
        started="2026-11-21T19:30:00Z",
        monitoring=m.summary(),
    )
    lines = monitoring_text(record).splitlines()
    assert lines[0] == "energy and monitoring (1 host(s); h|1: 1 sample(s) over 0 s):"
    assert lines[2] == (
        "| host | item | average power (W) | max power (W) | power std (W) | TDP (W) |"
    )
    assert "| h\\|1 | device 0 | 253.4 | 253.4 | 0.0 | 400.0 |" in lines  # a pipe escaped
    assert "| h\\|1 | system | 12.2 | — |  |" in lines
    assert "| h\\|1 | device 0 |  | 1.9 | 52.8 |" in lines
    assert "—: not given by the hardware; empty: does not apply." in lines
    assert (
        "  - host h|1: no host memory use: the samples carry none (psutil not importable there)"
        in lines
    )
    unsampled = record.model_copy(update={"monitoring": None})
    assert monitoring_text(unsampled).startswith("energy and monitoring: no sys sample")
