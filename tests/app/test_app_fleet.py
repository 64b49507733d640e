"""The Fleet screen (issue 42): a qualification's table and link matrix, filled as hosts
and pairs finish. The qualification here is a recorded one: samples and link numbers
judged by tui.qualify's own judge (no runs), fed to the screen as its thread feeds it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from app_support import fixed_inventory, make_app, plain, run, wait_for
from textual.pilot import Pilot
from textual.widgets import Label, Static
from textual.widgets._footer import FooterKey

from tui.app.fleetprogress import FleetProgress
from tui.app.screens.fleet import FleetScreen
from tui.core import paths
from tui.qualify.judge import Rule, Sample, judge, judge_links
from tui.qualify.output import Result
from tui.qualify.schedule import pair_rounds
from tui.results import qualifications

HOSTS = ["node1", "node2", "node3", "node4"]
GEMM = "base-computation CPUx1x1 gemm_tflops"
MEM = "base-memory-bandwidth CPUx1x1 mem_bw_gbps"
LINK = "base-interconnect CPUx2x1 bus_gbps"
RULES = {GEMM: Rule(GEMM, True, 20.0), MEM: Rule(MEM, True, 20.0)}


def samples(hosts: list[str]) -> list[Sample]:
    """node3 at a third of its peers' GEMM rate; node2 at half their memory bandwidth,
    its samples taken while the host was busy."""
    out = []
    for i, host in enumerate(hosts):
        for k in range(3):
            gemm = (0.31 if host == "node3" else 1.0) * (100.0 + i + k)
            busy = "other processes used 1.4 CPUs" if host == "node2" else None
            out.append(Sample(host, None, GEMM, gemm))
            mem = (0.5 if host == "node2" else 1.0) * (20.0 + 0.1 * (i + k))
            out.append(Sample(host, None, MEM, mem, busy))
    return out


def links(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
    """Every link of node4 at a fifth of the others."""
    return {
        (a, b): [(0.2 if "node4" in (a, b) else 1.0) * (10.0 + 0.1 * k) for k in range(3)]
        for a, b in pairs
    }


def judged(hosts: list[str], pairs: list[tuple[str, str]]) -> Result:
    """What Qualification.judged gives for these hosts' samples and these pairs' links."""
    values = {LINK: links(pairs)}
    return Result(
        group="cpu",
        hosts=HOSTS,
        repeat=3,
        verdicts=judge(samples(hosts), RULES, 3),
        link_values=values,
        links={LINK: judge_links(values[LINK], Rule(LINK, True, 30.0))},
    )


def recorded() -> FleetProgress:
    """A finished qualification of four hosts."""
    progress = FleetProgress(list(HOSTS), started=True)
    every = [p for r in pair_rounds(HOSTS) for p in r]
    for host in HOSTS:
        progress.done("host", (host,), judged(HOSTS, []))
    for pair in every:
        progress.done("pair", pair, judged(HOSTS, every))
    progress.finish(judged(HOSTS, every))
    return progress


async def show_recorded(pilot: Pilot) -> None:
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, FleetScreen))
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
            await pilot.press("5")
            await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
            screen = app.screen
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


def test_qualify_refuses_a_bad_repeat_and_starts_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        app = make_app(tmp_path, inventory=fixed_inventory(tmp_path))
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            await pilot.press("5")
            await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
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
            await pilot.press("5")
            await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
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
            await pilot.press("5")
            await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
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
