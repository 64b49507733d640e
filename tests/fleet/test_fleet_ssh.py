"""A two-node run over real SSH: two network-namespace hosts, torchrun across them.

The hosts share this machine's files (the repository, the venv) but not its network:
the workload on node 2 reaches node 1's torchrun store over the test bridge, at the
master address taken from the first host of the play.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import testhosts
from conftest import Fleetperf

from tui.core.stream import reach
from tui.engine.inventory import load_inventory

pytestmark = [
    pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available())),
    pytest.mark.slow,
]


def test_two_ssh_nodes_run_one_case(emitter: Fleetperf, tmp_path: Path) -> None:
    with testhosts.TestNetwork(tmp_path / "net") as net:
        nodes = [net.add_host("node1"), net.add_host("node2")]
        inventory = testhosts.cpu_inventory(net, nodes, emitter.data_root, tmp_path / "fleet.yml")
        out = emitter.batch("emitter", "cpu/CPUx2x1", args=("-i", str(inventory)))
        assert out.returncode == 0, out.stdout + out.stderr
        # The followers went over the connection Ansible keeps to each host (one
        # handshake per host, not two): the socket they name is the one Ansible made.
        hostvars = load_inventory(inventory).hostvars
        for h in nodes:
            how = reach(h.name, hostvars[h.name])
            assert how is not None and how.ssh is not None
            control = next(a for a in how.ssh if a.startswith("ControlPath="))
            assert Path(control.removeprefix("ControlPath=")).is_socket()
    (rec,) = emitter.records()
    assert rec["status"] == "passed" and rec["hosts"] == ["node1", "node2"]
    run_dir = emitter.results / "runs" / rec["run_id"]
    log = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert {(r["host"], r["rank"]) for r in log if r["type"] == "MetricSample"} == {
        ("node1", 0),
        ("node2", 1),
    }
    # Each node ran under its own run root, and both nodes' files came back.
    for h in nodes:
        host_run = h.root / "runs" / rec["run_id"]
        assert (host_run / "exit_code").read_text() == "0"
        assert (run_dir / "hosts" / h.name / "stdout.log").is_file()
        # The lines came through the ssh follower (tui/core/stream.py): no poll read any.
        assert not (host_run / "events.offset").exists()
