"""``fleetperf results``: the status filter, empty answers, CSV, pruning, --version."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from seed_records import seed001_records

from tui.store import ResultStore

REPO = Path(__file__).resolve().parents[1]


def fleetperf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A store with two passed runs, one failed and one aborted, each with its directory."""
    now = datetime.now(UTC)
    old, new = (now - timedelta(days=10)).isoformat(), (now - timedelta(hours=1)).isoformat()
    r1, r2, r3, r4 = seed001_records()
    records = [
        r1.model_copy(update={"started": old}),
        r2.model_copy(update={"started": old}),
        r3.model_copy(update={"started": new, "status": "failed", "error": "boom"}),
        r4.model_copy(update={"started": new, "status": "aborted"}),
    ]
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record in records:
            run_dir = tmp_path / "runs" / record.run_id
            (run_dir / "hosts").mkdir(parents=True)
            (run_dir / "result.json").write_text("{}\n")
            store.add(record.model_copy(update={"run_dir": str(run_dir)}))
    return tmp_path


def records_day(results: Path, run_id: str) -> str:
    with ResultStore(results / "fleetperf.sqlite") as store:
        record = store.get(run_id)
    assert record is not None
    return record.started[:10]


def _rows(table: str) -> list[str]:
    """The run ids of a markdown table's rows."""
    return re.findall(r"^\| (r\d) \|", table, flags=re.MULTILINE)


def test_passed_runs_by_default_with_a_count_of_the_others(results: Path) -> None:
    out = fleetperf("results", "--results", str(results))
    assert out.returncode == 0, out.stderr
    assert _rows(out.stdout) == ["r1", "r2"]
    assert f"| r1 | {records_day(results, 'r1')} | A100单机8卡（1x8） |" in out.stdout
    assert "(2 run(s) with another status hidden: --status all shows them)" in out.stdout
    failed = fleetperf("results", "--results", str(results), "--status", "failed")
    assert _rows(failed.stdout) == ["r3"]
    every = fleetperf("results", "--results", str(results), "--status", "all")
    assert _rows(every.stdout) == ["r1", "r2", "r3", "r4"]
    assert "hidden" not in every.stdout


def test_no_such_runs_is_a_line_not_an_error(results: Path) -> None:
    out = fleetperf("results", "--results", str(results), "--case", "nope")
    assert out.returncode == 0
    assert out.stdout == "no passed runs of case nope in the store\n"
    js = fleetperf("results", "--results", str(results), "--case", "nope", "--format", "json")
    assert js.stdout == "[]\n"


def test_csv_has_units_and_no_trailing_blank_line(results: Path) -> None:
    out = fleetperf("results", "--results", str(results), "--format", "csv", "--status", "all")
    assert out.stdout.endswith(".0\n") or out.stdout.endswith(",\n")
    assert not out.stdout.endswith("\n\n")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 4 and float(rows[0]["p_core (samples/s)"]) == 1942.6


def test_prune_removes_rows_and_directories_together(results: Path) -> None:
    refused = fleetperf("results", "--results", str(results), "--prune")
    assert refused.returncode == 2 and "--prune: name the runs" in refused.stderr
    out = fleetperf("results", "--results", str(results), "--prune", "--status", "failed")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pruned r3 ")
    assert not (results / "runs" / "r3").exists()
    one = fleetperf("results", "--results", str(results), "--prune", "r4")
    assert one.stdout.startswith("pruned r4 ") and not (results / "runs" / "r4").exists()
    old = fleetperf("results", "--results", str(results), "--prune", "--older-than", "5")
    assert old.stdout.count("pruned ") == 2  # r1 and r2: ten days old
    with ResultStore(results / "fleetperf.sqlite") as store:
        assert store.list() == []
    assert list((results / "runs").iterdir()) == []


def test_version() -> None:
    out = fleetperf("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("fleetperf ") and len(out.stdout.split()) >= 2
