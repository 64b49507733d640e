"""``fleetperf qualify`` on three hosts that are this machine under other names: its
all-host all_reduce keeps every rank's own times in its record, and the qualification
judges them, rank by rank, named by inventory host (docs/qualify.md, "Stragglers")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host, write_inventory

HOSTS = ("node1", "node2", "node3")


@pytest.mark.slow  # seven real runs one after another: about 2 to 3 minutes on 2 cores
def test_the_all_host_all_reduce_judges_every_rank(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "d", results=tmp_path / "r")
    inventory = write_inventory(tmp_path / "inv.yml", {h: local_host(fp, h) for h in HOSTS})
    out = fp.run(
        "qualify", "-i", str(inventory), "--repeat", "1", "--set", "iterations=5",
        "--case", "base-computation/CPUx1x1", "--case", "base-interconnect/CPUx2x1",
        "--format", "json", timeout=560,
    )  # fmt: skip
    data = json.loads(out.stdout)
    assert out.returncode == (3 if data["flagged"] else 0), out.stderr
    assert "all_reduce over 3 hosts: bus_gbps" in out.stderr
    assert data["ranks_judged"] == 3, out.stderr
    # A rank this shared machine slowed may be named: by rank and inventory host.
    assert all(s["host"] in HOSTS and 0 <= s["rank"] < 3 for s in data["stragglers"])
    flagged = [line for line in data["flagged"] if line.startswith("FLAGGED straggler")]
    assert len(flagged) == len(data["stragglers"])
    (record,) = [r for r in fp.records() if r["config"] == "CPUx3x1"]
    assert record["hosts"] == list(HOSTS) and record["status"] == "passed"
    assert [t["rank"] for t in record["rank_times"]] == [0, 1, 2]
    assert [t["node"] for t in record["rank_times"]] == [0, 1, 2]
    assert all(len(t["s"]) == 5 for t in record["rank_times"])
