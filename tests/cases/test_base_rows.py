"""A base row that measured nothing never reads as passed (issue 41 point 10): cpu's h2d
row always measured null ("/" in the table) and said passed. A plain CPU host has no
device to copy to, so no cpu config offers h2d, the base suite has no such row, and h2d
asked for on a CPU host anyway is refused at the workload's start: a failed run that
says why, not a passed one."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, Fleetperf

from tui.catalog import catalog
from tui.catalog.suites import load_suite


def _test(case: str, ref: str) -> str | None:
    """The base-interconnect test a config runs; None for another case."""
    if case != "base-interconnect":
        return None
    loaded = catalog.load_case(case)
    return str(catalog.resolve(loaded, catalog.load_config(loaded, ref)).hp["test"])


def test_no_cpu_config_or_base_suite_row_runs_h2d() -> None:
    case = catalog.load_case("base-interconnect")
    cpu = [ref for ref in catalog.config_refs(case) if ref.startswith("cpu/")]
    assert cpu and not [ref for ref in cpu if _test("base-interconnect", ref) == "h2d"]
    rows = load_suite("base").pick(["cpu"])
    assert rows and not [pair for pair in rows if _test(*pair) == "h2d"]
    # the GPU rows keep theirs
    gpu = [ref for ref in catalog.config_refs(case) if not ref.startswith("cpu/")]
    assert {"nvidia/A100x1x8-h2d", "nvidia/H100x1x8-h2d"} <= set(gpu)


@pytest.mark.slow  # a real run: torchrun, two processes
def test_h2d_on_a_cpu_host_is_a_failed_run_that_says_why(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    out = fp.batch("base-interconnect", "cpu/CPUx1x2", "test=h2d", timeout=300)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    (record,) = fp.records()
    assert record["status"] == "failed"
    assert "hp.test: h2d copies host memory to a device, and a CPU host has none" in str(
        record["error"]
    )
    assert record["metrics"]["bus_gbps"] is None  # type: ignore[index]
    row = next(line for line in out.stdout.splitlines() if line.startswith("| CPU"))
    assert "| passed" not in row and "failed" in row, row
