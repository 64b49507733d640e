"""The report's newest qualification (issue 42): its per-host verdict table and, from the
records of its batches judged again as fleetperf qualify judges them, each link metric's
heat map; nothing of it without one. Every name and reason in it escaped."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from tui.cli import main
from tui.qualify import keep
from tui.qualify.judge import Rule, Sample, judge, judge_links
from tui.qualify.output import Result, link_flags
from tui.qualify.rules import suite_rules
from tui.qualify.schedule import pair_rounds
from tui.results import qualifications, report_qualify
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


def node4_slow(a: str, b: str) -> float:
    """Every link of node4 a fifth of the others."""
    return 2.0 if "node4" in (a, b) else 10.0


def qualified(
    results: Path,
    hosts: list[str] = HOSTS,
    link: Callable[[str, str], float] = node4_slow,
    busy: dict[str, str] | None = None,
    group: str = "cpu",
) -> None:
    """A qualification kept as `fleetperf qualify` keeps it (the third host's GEMM a third of
    its peers', its samples taken while ``busy`` says so), and its link runs in the store
    (``link``: a pair's bus_gbps)."""
    busy = busy or {}
    samples = [
        Sample(h, None, GEMM, (0.31 if i == 2 else 1.0) * (100.0 + i + k), busy.get(h))
        for i, h in enumerate(hosts)
        for k in range(3)
    ]
    verdicts = judge(samples, {GEMM: Rule(GEMM, True, 20.0)}, 3)
    result = Result(group, hosts, 3, verdicts, {}, {}, batch_ids=[BATCH])
    pairs = [p for r in pair_rounds(hosts) for p in r]
    with ResultStore(results / "fleetperf.sqlite") as store:
        for i, (a, b) in enumerate(pairs):
            store.add(link_record(i, a, b, link(a, b) + 0.01 * i))
    keep.save(str(results / "fleetperf.sqlite"), "2026-11-29T05:00:00Z", result)


def report_page(results: Path) -> str:
    out = results / "r.html"
    assert main(["report", "--results", str(results), "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


CELL = re.compile(r'<td class="heat-(\w+)( heat-flagged)?" title="(\S+) – (\S+):[^"]*">[^<]*</td>')


def cells(page: str) -> dict[frozenset[str], tuple[str, bool]]:
    """The heat map's cells: pair -> (shade, marked flagged), each pair seen both ways."""
    found: dict[frozenset[str], tuple[str, bool]] = {}
    for shade, flagged, a, b in CELL.findall(page):
        pair = frozenset((a, b))
        assert found.setdefault(pair, (shade, bool(flagged))) == (shade, bool(flagged))
        assert page.count(f"{a} – {b}:") == 1
    return found


def test_the_report_shows_the_newest_qualification(tmp_path: Path) -> None:
    qualified(tmp_path)
    page = report_page(tmp_path)
    assert "Qualification: group cpu, 2026-11-29T05:00:00Z" in page
    assert re.search(r"<td>node3</td>.*?<td>flagged", page)
    assert "Links: base-interconnect CPUx2x1 bus_gbps" in page  # the command's label
    # Every cell of node4's row and column is red and flagged, none of the others.
    shown = cells(page)
    assert len(shown) == 6
    assert {p for p, cell in shown.items() if cell == ("bad", True)} == {
        p for p in shown if "node4" in p
    }
    assert {cell for p, cell in shown.items() if "node4" not in p} == {("ok", False)}


def test_the_report_marks_the_pairs_the_command_flags(tmp_path: Path) -> None:
    """Point 1: node4's three links at a fifth of the others (its NIC) and node1-node2 at
    half. The median of all six pairs (about 3.5) made node1-node2 read 1.4x, green and
    unmarked, while judge_links, against its peers (10), flags it at 0.5x and the command
    names it. The report now shades by judge_links' ratio and marks its flagged pairs."""

    def link(a: str, b: str) -> float:
        return 5.0 if {a, b} == {"node1", "node2"} else node4_slow(a, b)

    qualified(tmp_path, link=link)
    shown = cells(report_page(tmp_path))
    pairs = [p for r in pair_rounds(HOSTS) for p in r]
    values = {(a, b): [link(a, b) + 0.01 * i] for i, (a, b) in enumerate(pairs)}
    command = judge_links(values, suite_rules("base-interhost")["bus_gbps"])
    assert link_flags(command) == [
        "links of host node4: every link slow (host or its NIC)",
        "link node1 node2: slower than its peers (that path)",
    ]
    assert shown[frozenset(("node1", "node2"))] == ("bad", True)  # was ("ok", False)
    flagged = {frozenset(v.pair) for v in command.links if v.verdict == "flagged"}
    assert {p for p, (_, marked) in shown.items() if marked} == flagged
    assert {shade for p, (shade, _) in shown.items() if p not in flagged} == {"ok"}


def test_names_metrics_and_reasons_from_the_store_are_escaped(tmp_path: Path) -> None:
    """Point 2: host names, the group, reasons and the values' labels come from records and
    other controllers: no tag of theirs reaches the page raw, in text or in an attribute."""
    odd = ["node1", "node2", "<img src=x onerror=alert(1)>", 'n"4 onmouseover="alert(3)']
    busy = {odd[2]: "<script>alert(2)</script> [bold]x[/bold]"}
    qualified(
        tmp_path,
        odd,
        link=lambda a, b: 2.0 if odd[2] in (a, b) else 10.0,
        busy=busy,
        group="<i>cpu</i>",
    )
    page = report_page(tmp_path)
    for raw in ("<img", "<script", "<i>", 'onmouseover="'):
        assert raw not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "busy: &lt;script&gt;alert(2)&lt;/script&gt; [bold]x[/bold]" in page
    assert "Qualification: group &lt;i&gt;cpu&lt;/i&gt;" in page
    assert page.count('title="&lt;img src=x onerror=alert(1)&gt; – ') == 3  # its row


def test_no_qualification_no_section(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(link_record(0, "node1", "node2", 10.0))
    assert qualifications.latest(str(tmp_path / "fleetperf.sqlite")) == []
    out = tmp_path / "r.html"
    assert main(["report", "--results", str(tmp_path), "-o", str(out)]) == 0
    assert "Qualification" not in out.read_text(encoding="utf-8")


def test_heat_class_edges() -> None:
    assert [report_qualify.heat_class(r) for r in (1.2, 0.9, 0.89, 0.7, 0.69, None)] == [
        "ok",
        "ok",
        "slow",
        "slow",
        "bad",
        "none",
    ]
