"""The report's newest qualification (issue 42): its per-host verdict table and, from the
records of its batches, each link metric's heat map; nothing of it without one."""

from __future__ import annotations

import re
from pathlib import Path

from tui.cli import main
from tui.qualify import keep
from tui.qualify.judge import Rule, Sample, judge
from tui.qualify.output import Result
from tui.qualify.schedule import pair_rounds
from tui.results import qualifications, report
from tui.results.record import RunRecord
from tui.results.store import ResultStore

HOSTS = ["node1", "node2", "node3", "node4"]
GEMM = "base-computation CPUx1x1 gemm_tflops"
BATCH = "20261129-050000-qualify-abcd"


def link_record(i: int, a: str, b: str, value: float) -> RunRecord:
    return RunRecord(
        run_id=f"20261129-0501{i:02d}-base-interconnect-{i:04x}",
        case="base-interconnect",
        vendor="cpu",
        config="CPUx2x1",
        hosts=[a, b],
        status="passed",
        started=f"2026-11-29T05:01:{i:02d}Z",
        finished=f"2026-11-29T05:01:{i + 1:02d}Z",
        batch_id=BATCH,
        metrics={"bus_gbps": value, "bus_gbps_datasheet": 0.0, "bus_gbps_min": value},
    )


def qualified(results: Path) -> None:
    """A qualification kept as `fleetperf qualify` keeps it (node3's GEMM a third of its
    peers'), and its link runs in the store (every link of node4 a fifth of the others)."""
    samples = [
        Sample(h, None, GEMM, (0.31 if h == "node3" else 1.0) * (100.0 + i + k))
        for i, h in enumerate(HOSTS)
        for k in range(3)
    ]
    verdicts = judge(samples, {GEMM: Rule(GEMM, True, 20.0)}, 3)
    result = Result("cpu", HOSTS, 3, verdicts, {}, {}, batch_ids=[BATCH])
    pairs = [p for r in pair_rounds(HOSTS) for p in r]
    with ResultStore(results / "fleetperf.sqlite") as store:
        for i, (a, b) in enumerate(pairs):
            store.add(link_record(i, a, b, (2.0 if "node4" in (a, b) else 10.0) + 0.01 * i))
    keep.save(str(results / "fleetperf.sqlite"), "2026-11-29T05:00:00Z", result)


def test_the_report_shows_the_newest_qualification(tmp_path: Path) -> None:
    qualified(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", "--results", str(tmp_path), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Qualification: group cpu, 2026-11-29T05:00:00Z" in page
    assert re.search(r"<td>node3</td>.*?<td>flagged", page)
    assert "Links: CPUx2x1 bus_gbps" in page
    # Every cell of node4's row and column is red, none of the others.
    bad = re.findall(r'class="heat-bad" title="(\S+) – (\S+):', page)
    assert len(bad) == 6 and all("node4" in pair for pair in bad)
    assert page.count('class="heat-ok"') == 6


def test_no_qualification_no_section(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(link_record(0, "node1", "node2", 10.0))
    assert qualifications.latest(str(tmp_path / "fleetperf.sqlite")) == []
    out = tmp_path / "r.html"
    assert main(["report", "--results", str(tmp_path), "-o", str(out)]) == 0
    assert "Qualification" not in out.read_text(encoding="utf-8")


def test_heat_class_edges() -> None:
    assert [report.heat_class(r) for r in (1.2, 0.9, 0.89, 0.7, 0.69, None)] == [
        "ok",
        "ok",
        "slow",
        "slow",
        "bad",
        "none",
    ]
