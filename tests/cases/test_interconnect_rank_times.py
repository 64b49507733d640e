"""base-interconnect's all_reduce keeps each rank's own time per iteration (the result's
``rank_times``, docs/cases/base.md "Stragglers"): real runs of 3 local processes over gloo,
as the workload and through ``fleetperf --batch`` into the record."""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import sys
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from llm_cases import events, resolved_config, run_workload

sys.path.insert(0, str(REPO / "cases"))

CASES = REPO / "cases"
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def _check(times: list[dict], ranks: int, iterations: int) -> None:
    assert [t["rank"] for t in times] == list(range(ranks))
    for t in times:
        assert t["node"] == 0 and t["host"] == socket.gethostname()
        assert len(t["s"]) == iterations
        assert all(math.isfinite(s) and 0 < s < 1 for s in t["s"])


@pytest.mark.slow
def test_every_rank_s_own_times_reach_the_result(tmp_path: Path) -> None:
    env = {**ONE_THREAD, "FLEETPERF_PEAK_CACHE": str(tmp_path / "peak.json")}
    config = resolved_config("base-interconnect", "cpu/CPUx1x2", tmp_path / "run", iterations=7)
    proc = run_workload(
        "base-interconnect", config, tmp_path / "data", nproc=3, extra_env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = [e for e in events(config.parent) if e["kind"] == "result"]
    _check(result["rank_times"], 3, 7)
    assert any("rank_times: each rank's own time" in n for n in result["notes"])


@pytest.mark.slow
def test_the_record_keeps_every_rank_s_times_through_the_store(tmp_path: Path) -> None:
    """``fleetperf --batch`` of the 2-process all_reduce: the record read back from the
    store (``fleetperf results --format json``) carries both ranks' own times."""
    fp = Fleetperf(cases_dir=CASES, data_root=tmp_path / "data", results=tmp_path / "results")
    proc = fp.batch("base-interconnect", "cpu/CPUx1x2", "iterations=5", timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = fp.records()
    assert record["status"] == "passed"
    _check(record["rank_times"], 2, 5)


def test_rank_times_are_cut_to_fit_the_result_line() -> None:
    """Past RANK_TIMES_CHARS fewer seconds a rank are kept (halved, down to 1), then none:
    the result line stays under the controller's 64 KiB."""
    spec = importlib.util.spec_from_file_location(
        "interconnect", CASES / "base-interconnect/run.py"
    )
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    times = [{"rank": r, "node": r, "host": f"node{r}", "s": [0.001234] * 50} for r in range(4)]
    assert run.within(times, 100_000) == times
    cut = run.within(times, 700)
    assert [len(t["s"]) for t in cut] == [12] * 4 and len(json.dumps(cut)) <= 700
    assert run.within(times, 50) == []
    big = [{**times[0], "rank": r} for r in range(300)]  # 50 a rank: 163 KB
    kept = run.within(big, run.RANK_TIMES_CHARS)
    assert len(kept) == 300 and len(json.dumps(kept)) <= run.RANK_TIMES_CHARS
    assert 1 <= len(kept[0]["s"]) < 50
    assert run.within([{**times[0], "rank": r} for r in range(3000)], run.RANK_TIMES_CHARS) == []
