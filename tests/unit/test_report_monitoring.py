"""``fleetperf report`` shows each detailed run's energy and monitoring tables, escaped."""

from __future__ import annotations

from pathlib import Path

from seed_records import distilbert

from tui.core.events import SysSample
from tui.results.monitoring import Monitor
from tui.results.report import render

NUMBERS = (30.0, 300.0, 310.0, 320.0, 0.9, 30.0)


def summary(host: str) -> dict:
    monitor = Monitor("nvidia", 1)
    for t, power in ((0.0, 200.0), (5.0, 300.0)):
        values = {"cpu_percent": 40.0, "dev0_power_w": power, "dev0_power_limit_w": 400.0}
        monitor.add(SysSample("run", host, 0, t, values))
    result = monitor.summary()
    assert result is not None
    return result


def test_the_page_shows_each_newest_runs_energy_and_monitoring(tmp_path: Path) -> None:
    sampled = distilbert("r-sampled", "A100x1x1", {}, NUMBERS, monitoring=summary("gpu-<b>"))
    unsampled = distilbert("r-unsampled", "A100x1x8", {}, NUMBERS)
    page = render([sampled, unsampled], tmp_path)
    assert "Energy and monitoring of the same runs" in page
    assert "<h4>nvidia/A100x1x1, run r-sampled</h4>" in page
    assert "<th>average power (W)</th><th>max power (W)</th><th>power std (W)</th>" in page
    # device 0: 200 and 300 W: average 250, max 300, population std 50; TDP 400
    row = "<td>device 0</td><td>250.0</td><td>300.0</td><td>50.0</td><td>400.0</td>"
    assert row in page
    assert "<td>gpu-&lt;b&gt;</td><td>system</td><td>40.0</td><td>—</td><td></td>" in page
    assert "<li>host gpu-&lt;b&gt; device 0: no temperature, memory use, utilisation</li>" in page
    assert "gpu-<b>" not in page  # the host's name only escaped
    assert "<h4>nvidia/A100x1x8, run r-unsampled</h4>" in page
    assert '<p class="note">no sys sample in this run</p>' in page
