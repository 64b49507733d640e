"""``fleetperf results``: the status filter, empty answers, CSV, pruning, --version."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import REPO
from seed_records import PEAK, seed001_records

from tui.results.store import ResultStore


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


@pytest.mark.parametrize(
    ("days", "why"),
    [
        ("nan", "a number of days"),
        ("inf", "a number of days"),
        ("1e308", "at most 36525"),
        ("-1", "not negative"),
        ("-0.5", "not negative"),
        ("five", "a number of days"),
    ],
)
def test_older_than_takes_only_a_sane_number_of_days(results: Path, days: str, why: str) -> None:
    """nan, inf and 1e308 ended in a traceback; a negative value selected every run."""
    for action in (("--prune",), ()):
        out = fleetperf("results", "--results", str(results), *action, "--older-than", days)
        assert out.returncode == 2, out.stdout
        assert out.stderr.startswith(f"fleetperf: error: --older-than {days}: "), out.stderr
        assert why in out.stderr and out.stderr.count("\n") == 1 and out.stdout == ""
    with ResultStore(results / "fleetperf.sqlite") as store:
        assert len(store.list()) == 4
    assert len(list((results / "runs").iterdir())) == 4


def test_prune_of_a_copied_results_dir_leaves_the_original_alone(results: Path) -> None:
    """The records of a copy name the original's run directories: a prune of the copy
    removes the copy's own <results>/runs/<run_id>, never the path the record holds."""
    copy = results / "copy"
    shutil.copytree(results, copy, ignore=shutil.ignore_patterns("copy"))
    out = fleetperf("results", "--results", str(copy), "--prune", "--status", "failed")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pruned r3 ")
    assert not (copy / "runs" / "r3").exists()
    assert (results / "runs" / "r3" / "result.json").is_file()


def test_a_run_dir_that_is_a_link_is_removed_as_a_link(results: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine\n")
    shutil.rmtree(results / "runs" / "r4")
    (results / "runs" / "r4").symlink_to(elsewhere)
    out = fleetperf("results", "--results", str(results), "--prune", "r4")
    assert out.returncode == 0, out.stderr
    assert not (results / "runs" / "r4").is_symlink()
    assert (elsewhere / "keep").read_text() == "mine\n"


def test_a_run_id_that_is_no_plain_name_is_refused_and_nothing_pruned(results: Path) -> None:
    arg = fleetperf("results", "--results", str(results), "--prune", "../r3")
    assert arg.returncode == 2
    assert arg.stderr == (
        "fleetperf: error: --prune: run_id '../r3' is not a run id (letters, digits, . _ -)\n"
    )
    # A store whose row says ../victim: <results>/runs/../victim is not a run directory.
    victim = results / "victim"
    victim.mkdir()
    with ResultStore(results / "fleetperf.sqlite") as store:
        (r1,) = [r for r in store.list() if r.run_id == "r1"]
        store.add(r1.model_copy(update={"run_id": "../victim", "status": "failed"}))
    out = fleetperf("results", "--results", str(results), "--prune", "--status", "failed")
    # The row is unreadable, so skipped and said (issue 39 point 2): never a path to prune.
    assert out.returncode == 0, out.stderr
    assert "run ../victim: unreadable record (run_id: not a run id" in out.stderr
    assert out.stdout == "pruned r3 (distilbert-pytorch A100x1x1, failed)\n"
    assert victim.is_dir() and not (results / "runs" / "r3").exists()


def test_version() -> None:
    out = fleetperf("--version")
    assert out.returncode == 0
    assert out.stdout.startswith("fleetperf ") and len(out.stdout.split()) >= 2


def test_results_print_a_hosts_escape_sequences_escaped(tmp_path: Path) -> None:
    """A run's error came from a host: `fleetperf results` shows its control codes, never
    sends them to the terminal (a title change, a cleared screen)."""
    r1 = seed001_records()[0]
    hostile = "died \x1b]0;pwned\x07 then \x1b[2J \x9b31m"
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(r1.model_copy(update={"status": "failed", "error": hostile}))
    for fmt in ("md", "csv", "json"):
        out = fleetperf("results", "--status", "all", "--format", fmt, "--results", str(tmp_path))
        assert out.returncode == 0, out.stderr
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", out.stdout + out.stderr), fmt
    assert "\\u001b]0;pwned" in out.stdout


def test_one_run_shows_what_its_mfu_divides(tmp_path: Path) -> None:
    """`fleetperf results RUN_ID`: the table, then the run's peak (chip, math, datasheet and
    measured peaks, model FLOP/s per device, which MFU divides which)."""
    r3 = seed001_records()[2]
    metrics = {**r3.metrics, "mfu": 41.8 / 156, "mfu_measured": 41.8 / 120}
    record = type(r3).model_validate(
        {**r3.model_dump(), "precision": "tf32", "peak": PEAK, "metrics": metrics}
    )
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(record)
    out = fleetperf("results", "r3", "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "| fp32 (TF32) | bs=96,lr=0.00015 |" in out.stdout
    assert (
        "\npeak (what MFU divides; per device):\n  chip                       A100\n" in out.stdout
    )
    assert "156 TFLOP/s  (mfu = model FLOP/s per device / this = 26.8%)" in out.stdout
    assert "120 TFLOP/s  (mfu_measured = model FLOP/s per device / this = 34.8%)" in out.stdout
    assert "model FLOP/s per device    41.8 TFLOP/s" in out.stdout
    every = fleetperf("results", "--results", str(tmp_path))
    assert "peak" not in every.stdout  # a table of runs: no peak block
    js = fleetperf("results", "r3", "--results", str(tmp_path), "--format", "json")
    assert json.loads(js.stdout)[0]["peak"] == PEAK


def test_one_run_shows_the_env_its_config_set(tmp_path: Path) -> None:
    """`fleetperf results RUN_ID`: the config's env as written, control codes escaped."""
    r1, r2 = seed001_records()[:2]
    env = {"BKCL_FORCE_SYNC": "1", "XPU_FC_AUTOTUNE_FILE": "{data_dir}/t.log", "E": "\x1b[2J"}
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(r1.model_copy(update={"config_env": env}))
        store.add(r2)
    out = fleetperf("results", r1.run_id, "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith(
        "\nenv from the config ({data_dir}: the case's data directory):\n"
        "  BKCL_FORCE_SYNC=1\n  XPU_FC_AUTOTUNE_FILE={data_dir}/t.log\n  E=\\u001b[2J\n"
    )
    other = fleetperf("results", r2.run_id, "--results", str(tmp_path))
    assert other.stdout.endswith("\nenv from the config: none\n")
    js = fleetperf("results", r1.run_id, "--results", str(tmp_path), "--format", "json")
    assert json.loads(js.stdout)[0]["config_env"] == env


def _store_with_long_ids(tmp_path: Path) -> tuple[str, str]:
    """Two runs with ids as new_run_id (tui/executors/base.py) draws them, sharing a
    tail's first digit."""
    r1, r2 = seed001_records()[:2]
    one = "20261121-100000-distilbert-pytorch-fec4a1b2c3d4e5f6"
    two = "20261121-110000-distilbert-pytorch-f0000000000000aa"
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        store.add(r1.model_copy(update={"run_id": one, "notes": ["loaded host: load 0.9"]}))
        store.add(r2.model_copy(update={"run_id": two}))
    return one, two


def test_results_and_prune_take_the_short_id_the_table_shows(tmp_path: Path) -> None:
    """Issue 29 point 4: `results fec4` (a table's short form) and any unique prefix."""
    one, two = _store_with_long_ids(tmp_path)
    table = fleetperf("results", "--results", str(tmp_path))
    assert "| fec4a1 |" in table.stdout  # the short form the operator copies
    shown = fleetperf("results", "fec4a1", "--results", str(tmp_path), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert [r["run_id"] for r in json.loads(shown.stdout)] == [one]
    by_prefix = fleetperf("results", "20261121-11", "--results", str(tmp_path), "--format", "json")
    assert [r["run_id"] for r in json.loads(by_prefix.stdout)] == [two]
    ambiguous = fleetperf("results", "f", "--results", str(tmp_path), "--prune")
    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert ambiguous.stderr == (
        f"fleetperf: error: run 'f' is ambiguous: 2 runs match ({one}, {two});"
        " give more of the id\n"
    )
    none = fleetperf("results", "abc9", "--results", str(tmp_path))
    assert none.returncode == 2 and none.stderr.startswith("fleetperf: error: no run 'abc9' in ")
    pruned = fleetperf("results", "fec4", "--results", str(tmp_path), "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith(f"pruned {one} ")
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        assert [r.run_id for r in store.list()] == [two]


def test_one_run_prints_its_notes(tmp_path: Path) -> None:
    """Issue 29 point 9: `results RUN_ID` prints the record's notes after its table."""
    one, two = _store_with_long_ids(tmp_path)
    out = fleetperf("results", one, "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "\nnotes:\n  - loaded host: load 0.9\n\npeak" in out.stdout
    assert "\nnotes: none\n" in fleetperf("results", two, "--results", str(tmp_path)).stdout


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    """`fleetperf cases | head -1`: the pipe closes under the listing; fleetperf stops as a
    shell tool does (exit 141), with nothing on stderr (before: a BrokenPipeError
    traceback)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "cases"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(1)
    proc.stdout.close()  # the reader is gone: the next write fails with EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == ""
