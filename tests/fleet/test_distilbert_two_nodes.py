"""distilbert-pytorch on two process-executor hosts, as `fleetperf fleet up 2` makes them:
real torch training across two network-namespace hosts whose hostname resolves to
loopback (gloo must bind the interface the play reaches each host on, not 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO, Fleetperf

from tui.localfleet.inventory import fleet_inventory

pytestmark = [
    pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available())),
    pytest.mark.slow,
]


def test_cpux2x1_as_written_on_two_fleet_hosts(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    out = fp.run("prepare", "distilbert-pytorch", "--synthetic")
    assert out.returncode == 0, out.stderr
    with testhosts.TestNetwork(tmp_path / "net") as net:
        nodes = [net.add_host("node1"), net.add_host("node2")]
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump(fleet_inventory(net)))  # `fleet up 2`'s own
        out = fp.batch(
            "distilbert-pytorch", "cpu/CPUx2x1", args=("-i", str(inventory)), timeout=1200
        )
        host_runs = [h.root / "runs" for h in nodes]
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    (rec,) = fp.records()
    assert rec["status"] == "passed" and rec["hosts"] == ["node1", "node2"]
    assert rec["config"] == "CPUx2x1"
    assert rec["metrics"]["acc"] >= rec["hp"]["target_acc"]
    assert "| CPU两机单卡（2x1） | fp32 |" in out.stdout
    run_dir = fp.results / "runs" / rec["run_id"]
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert {(e["host"], e["rank"]) for e in events if e["type"] == "MetricSample"} == {
        ("node1", 0),
        ("node2", 1),
    }
    for root in host_runs:
        stderr = (root / rec["run_id"] / "stderr.log").read_text()
        assert "Connection refused" not in stderr and "Traceback" not in stderr
