"""The Fleet screen (issue 42): a qualification's table and link matrix, filled as hosts
and pairs finish. The qualification here is a recorded one: samples and link numbers
judged by tui.qualify's own judge (no runs), fed to the screen as its thread feeds it."""

from __future__ import annotations

import asyncio
import io
import re
import threading
from pathlib import Path

import pytest
from app_support import fixed_inventory, make_app, plain, run, wait_for
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Label, RichLog, Select, Static
from textual.widgets._footer import FooterKey

from tui.app.fleetprogress import FleetProgress
from tui.app.screens.fleet import FleetScreen, heat_map
from tui.app.threads import draw_from_thread
from tui.core import paths
from tui.qualify.judge import Rule, Sample, judge, judge_links
from tui.qualify.output import Result
from tui.qualify.schedule import pair_rounds
from tui.results import qualifications, report_qualify

HOSTS = ["node1", "node2", "node3", "node4"]
GEMM = "base-computation CPUx1x1 gemm_tflops"
MEM = "base-memory-bandwidth CPUx1x1 mem_bw_gbps"
LINK = "base-interconnect CPUx2x1 bus_gbps"
P2P = "base-interconnect CPUx2x1-p2p bus_gbps"
RULES = {GEMM: Rule(GEMM, True, 20.0), MEM: Rule(MEM, True, 20.0)}
RULE_30 = Rule(LINK, True, 30.0)  # suites/base-interhost.yaml's bus_gbps


def samples(hosts: list[str], names: list[str] = HOSTS) -> list[Sample]:
    """The third host (node3) at a third of its peers' GEMM rate; the second (node2) at half
    their memory bandwidth, its samples taken while the host was busy."""
    out = []
    for i, host in enumerate(hosts):
        for k in range(3):
            gemm = (0.31 if host == names[2] else 1.0) * (100.0 + i + k)
            busy = "other processes used 1.4 CPUs" if host == names[1] else None
            out.append(Sample(host, None, GEMM, gemm))
            mem = (0.5 if host == names[1] else 1.0) * (20.0 + 0.1 * (i + k))
            out.append(Sample(host, None, MEM, mem, busy))
    return out


def links(pairs: list[tuple[str, str]], slow: str = "node4") -> dict[tuple[str, str], list[float]]:
    """The pairs touching ``slow`` (a host, or a pair as "node1 node2") at a fifth of the
    others."""
    return {
        (a, b): [(0.2 if slow in (a, b, f"{a} {b}") else 1.0) * (10.0 + 0.1 * k) for k in range(3)]
        for a, b in pairs
    }


def judged(hosts: list[str], pairs: list[tuple[str, str]], names: list[str] = HOSTS) -> Result:
    """What Qualification.judged gives for these hosts' samples and these pairs' links:
    on CPUx2x1 every link of the fourth host slow, on CPUx2x1-p2p the first two hosts'."""
    values = {LINK: links(pairs, names[3]), P2P: links(pairs, f"{names[0]} {names[1]}")}
    values = {label: by_pair for label, by_pair in values.items() if by_pair}
    return Result(
        group="cpu",
        hosts=names,
        repeat=3,
        verdicts=judge(samples(hosts, names), RULES, 3),
        link_values=values,
        links={label: judge_links(v, Rule(label, True, 30.0)) for label, v in values.items()},
    )


def recorded(names: list[str] = HOSTS) -> FleetProgress:
    """A finished qualification of four hosts (named ``names``)."""
    progress = FleetProgress(list(names), started=True)
    every = [p for r in pair_rounds(names) for p in r]
    for host in names:
        progress.done("host", (host,), judged(names, [], names))
    for pair in every:
        progress.done("pair", pair, judged(names, every, names))
    progress.finish(judged(names, every, names))
    return progress


async def open_fleet(pilot: Pilot) -> FleetScreen:
    """Key 5, and the Fleet screen it shows."""
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, FleetScreen))
    screen = pilot.app.screen
    assert isinstance(screen, FleetScreen)
    return screen


async def show_recorded(pilot: Pilot) -> None:
    await open_fleet(pilot)
    await pilot.app.workers.wait_for_complete()  # the inventory's groups
    pilot.app.screen.show(recorded())
    await pilot.pause()


def host_rows(table: Static) -> dict[str, str]:
    text = plain(table, width=160)
    return {
        line.split()[0]: line
        for line in text.splitlines()
        if line.split()[:1] and line.split()[0].startswith("node")
    }


def test_the_table_and_matrix_fill_as_hosts_and_pairs_finish(tmp_path: Path) -> None:
    """The screen drawn from another thread at each finished host and pair, as the
    qualification's on_done hook draws it: host states, rounds done of N-1, the matrix
    filling; at the end each host's verdict, node3 flagged, node2 inconclusive (busy),
    node4's links marked."""
    rounds = pair_rounds(HOSTS)

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_fleet(pilot)
            await wait_for(pilot, lambda: {"q", "5"} <= {k.key for k in screen.query(FooterKey)})
            assert "x" not in {k.key for k in screen.query(FooterKey)}  # only while running
            palette = {c.title for c in app.get_system_commands(screen)}
            assert {"Qualify", "Fleet"} <= palette
            table = screen.query_one("#fleet-table", Static)
            matrix = screen.query_one("#fleet-matrix", Static)
            summary = screen.query_one("#fleet-summary", Label)
            progress = FleetProgress(list(HOSTS), started=True)
            step = threading.Event()

            def feed(kind: str, hosts: tuple[str, ...], result: Result) -> None:
                def draw() -> None:
                    progress.done(kind, hosts, result)
                    screen.show(progress)
                    step.set()

                step.clear()
                app.call_from_thread(draw)
                step.wait(10)

            def host_phase() -> None:
                feed("host", ("node1",), judged(["node1"], []))

            worker = threading.Thread(target=host_phase)
            worker.start()
            await wait_for(pilot, lambda: step.is_set())
            worker.join()
            assert [r.split()[1] for r in host_rows(table).values()] == [
                "measured",
                "measuring",
                "measuring",
                "measuring",
            ]
            assert "hosts measured 1 of 4; rounds done 0 of 3" in plain(summary)

            def the_rest() -> None:
                for host in HOSTS[1:]:
                    feed("host", (host,), judged(HOSTS, []))
                done: list[tuple[str, str]] = []
                for pair in rounds[0]:
                    done.append(pair)
                    feed("pair", pair, judged(HOSTS, done))

            worker = threading.Thread(target=the_rest)
            worker.start()
            await wait_for(pilot, lambda: "rounds done 1 of 3" in plain(summary))
            worker.join()
            shown = " ".join(plain(matrix, width=160).split())
            assert "rounds done 1 of 3" in shown and shown.count("-") >= 4  # 2 pairs to come
            screen.show(recorded())
            await pilot.pause()
            rows = host_rows(table)
            assert "flagged" in rows["node3"].split()[1]
            assert "inconclusive" in rows["node2"]
            assert "flagged (links)" in rows["node4"]
            shown = " ".join(plain(matrix, width=160).split())
            assert "rounds done 3 of 3" in shown and "2.02!" in shown
            slow = recorded()
            assert slow.result is not None
            too_slow = "FLAGGED link node1 node4: base-interconnect CPUx2x1 too slow"
            slow.result.failures.append(too_slow)
            screen.show(slow)
            await pilot.pause()
            assert too_slow in plain(screen.query_one("#fleet-flags", Static), width=160)

    run(scenario())


def test_a_thread_drawing_as_the_app_closes_draws_nothing(tmp_path: Path) -> None:
    """The inventory's groups read in a thread that finishes as the app closes: Textual
    prunes the screens then, and drawing into them raised NoMatches (a Select without its
    overlay), ending the app with a traceback (CI saw it once). A thread draws into a screen
    shown or not; once the app exits, or into a widget removed, it draws nothing."""

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_fleet(pilot)
            select = screen.query_one("#fleet-group", Select)
            await wait_for(pilot, lambda: select.value != Select.BLANK)
            await pilot.press("1")
            await wait_for(pilot, lambda: app.screen is not screen)
            await asyncio.to_thread(draw_from_thread, screen, screen._set_groups, ["late"])
            assert select.value == "late"  # drawn though another screen is shown
            log = screen.query_one("#fleet-log", RichLog)
            await log.remove()
            drawn: list[str] = []
            await asyncio.to_thread(draw_from_thread, log, drawn.append, "removed")
            app.exit()
            await asyncio.to_thread(draw_from_thread, screen, screen._set_groups, ["later"])
            await asyncio.to_thread(draw_from_thread, screen, drawn.append, "closing")
            assert drawn == []
            assert select.value == "late"

    run(scenario())


def test_qualify_refuses_a_bad_repeat_and_starts_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await open_fleet(pilot)
            await app.workers.wait_for_complete()
            screen = app.screen
            screen.query_one("#fleet-repeat").value = "0"
            await pilot.press("q")
            await pilot.pause()
            assert screen.qual is None
            assert any("--repeat 0: must be at least 1" in n.message for n in app._notifications)

    run(scenario())


def test_a_qualification_refused_before_launch_says_why(tmp_path: Path) -> None:
    """q through tui.qualify for real (the inventory read, the hosts' boot ids over
    ansible): this inventory's host has no fleetperf_python, so the first run is refused
    before launch as fleetperf qualify refuses it; the screen says so and judges nothing."""

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await open_fleet(pilot)
            await app.workers.wait_for_complete()
            screen = app.screen
            screen.query_one("#fleet-repeat").value = "1"
            await pilot.press("q")
            summary = screen.query_one("#fleet-summary", Label)
            await wait_for(pilot, lambda: "not judged" in plain(summary), timeout=120)
            assert "fleetperf_python is not set" in plain(summary)
            assert "not measured" in plain(screen.query_one("#fleet-table", Static))
            await wait_for(pilot, lambda: screen.qual is None and not app.running)

    run(scenario())


@pytest.mark.slow
def test_a_qualification_of_this_machine_from_the_app(tmp_path: Path) -> None:
    """The base suite's cpu rows on this machine's one host, once each (about 50 s): the
    runs in the store, the host's verdicts kept as fleetperf qualify keeps them (one host
    has no peers: inconclusive), and the report shows that qualification."""

    async def scenario() -> None:
        app = make_app(tmp_path, paths.CASES_DIR)  # inventory/local.yml: localhost
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await open_fleet(pilot)
            await app.workers.wait_for_complete()
            screen = app.screen
            screen.query_one("#fleet-repeat").value = "1"
            await pilot.press("q")
            summary = screen.query_one("#fleet-summary", Label)
            await wait_for(pilot, lambda: "judged" in plain(summary), timeout=600)
            assert plain(summary).startswith("judged: 1 hosts")
            assert screen.progress.done_hosts == {"localhost"}  # told live (on_done)
            assert "inconclusive" in plain(screen.query_one("#fleet-table", Static), width=300)

    run(scenario())
    rows = qualifications.latest(str(tmp_path / "results" / "fleetperf.sqlite"))
    assert rows and {r["host"] for r in rows} == {"localhost"}


def matrix_text(screen: FleetScreen) -> str:
    return plain(screen.query_one("#fleet-matrix", Static), width=160)


def marked(text: str) -> set[frozenset[str]]:
    """The pairs a matrix marks ``!``: its rows are "N host value...", a value per host."""
    found = set()
    for cells in (line.split() for line in text.splitlines()):
        if len(cells) == len(HOSTS) + 2 and cells[0].isdigit():
            values = cells[2:]
            found |= {frozenset((cells[1], HOSTS[j])) for j, v in enumerate(values) if "!" in v}
    return found


def flagged(result: Result, label: str) -> set[frozenset[str]]:
    return {frozenset(v.pair) for v in result.links[label].links if v.verdict == "flagged"}


def test_m_shows_the_next_link_metric(tmp_path: Path) -> None:
    """Point 3: m (in the footer and the palette) steps through the link metrics, the
    matrix's title naming the one shown, each marking the pairs judge_links flagged; the
    metric stays chosen while the qualification redraws the screen."""

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            await show_recorded(pilot)
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            await wait_for(pilot, lambda: "m" in {k.key for k in screen.query(FooterKey)})
            assert "Next link metric" in {c.title for c in app.get_system_commands(screen)}
            assert screen.active_bindings["m"].binding.id == "fleet.metric"  # no other m here
            result = recorded().result
            assert result is not None and list(result.links) == [LINK, P2P]
            first = matrix_text(screen)
            assert "Links: bus_gbps CPUx2x1 (1 of 2, m: next)" in first
            assert (
                marked(first)
                == flagged(result, LINK)
                == {frozenset((h, "node4")) for h in HOSTS[:3]}
            )
            await pilot.press("m")
            second = matrix_text(screen)
            assert "Links: bus_gbps CPUx2x1-p2p (2 of 2, m: next)" in second
            assert marked(second) == flagged(result, P2P) == {frozenset(("node1", "node2"))}
            screen.show(recorded())  # a redraw from the qualification's thread
            await pilot.pause()
            assert "CPUx2x1-p2p (2 of 2" in matrix_text(screen)
            await pilot.press("m")
            assert "Links: bus_gbps CPUx2x1 (1 of 2, m: next)" in matrix_text(screen)

    run(scenario())


def test_one_link_metric_no_m(tmp_path: Path) -> None:
    """With one link metric there is nothing to switch to: m is neither in the footer nor
    in the palette, and the title does not count."""

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            await show_recorded(pilot)
            screen = app.screen
            progress = recorded()
            assert progress.result is not None
            del progress.result.links[P2P]
            screen.show(progress)
            await pilot.pause()
            assert "m" not in {k.key for k in screen.query(FooterKey)}
            assert "Next link metric" not in {c.title for c in app.get_system_commands(screen)}
            assert "Links: bus_gbps CPUx2x1; rounds done 3 of 3" in matrix_text(screen)

    run(scenario())


def test_host_names_and_metrics_show_literally(tmp_path: Path) -> None:
    """Host names and metric labels come from the inventory and records: markup in them is
    shown as written, never obeyed (a [bold] host stays '[bold]...' in the table and the
    matrix)."""
    names = ["[bold]node1[/bold]", "node2", "[red]node3", "node4[/]"]

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(120, 40)) as pilot:
            await show_recorded(pilot)
            screen = app.screen
            screen.show(recorded(names))
            await pilot.pause()
            table = plain(screen.query_one("#fleet-table", Static), width=160)
            matrix = matrix_text(screen)
            for name in names:
                assert name in table and name in matrix
            rows = {line.split()[0]: line for line in table.splitlines() if line.split()}
            assert "flagged" in rows["[red]node3"]
            assert "flagged (links)" in rows["node4[/]"]

    run(scenario())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_fleet_screen_on_its_second_link_metric(
    snap_compare, tmp_path: Path, size: tuple[int, int]
) -> None:
    """Point 3: the recorded qualification after m: the p2p matrix, node1-node2 marked."""
    app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))

    async def before(pilot: Pilot) -> None:
        await show_recorded(pilot)
        await pilot.press("m")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_the_app_and_the_report_mark_the_same_pairs() -> None:
    """Point 1: node4's links at a fifth of the others and node1-node2 at half. Against the
    median of all six pairs node1-node2 read 1.4x (the report's shade until now); against
    its peers, judge_links flags it at 0.5x. The app's matrix and the report's heat map mark
    the pairs judge_links flagged, no more and no fewer."""
    every = [p for r in pair_rounds(HOSTS) for p in r]
    values = {
        (a, b): [(0.5 if {a, b} == {"node1", "node2"} else 1.0) * v for v in by_pair]
        for (a, b), by_pair in links(every).items()
    }
    result = Result("cpu", HOSTS, 3, [], {LINK: values}, {LINK: judge_links(values, RULE_30)})
    flagged_pairs = flagged(result, LINK)
    assert frozenset(("node1", "node2")) in flagged_pairs and len(flagged_pairs) == 4
    progress = FleetProgress(list(HOSTS), started=True)
    progress.finish(result)
    console = Console(width=160, file=io.StringIO(), color_system=None, record=True)
    console.print(heat_map(progress, result, None))
    assert marked(console.export_text()) == flagged_pairs
    page = report_qualify.heat_map(LINK, HOSTS, result.links[LINK])
    in_page = re.findall(r'class="heat-\w+ heat-flagged" title="(\S+) – (\S+):', page)
    assert {frozenset(p) for p in in_page} == flagged_pairs
