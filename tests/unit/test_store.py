"""The results store on a real SQLite file: round trips, filters, history, migration,
and two controllers writing at once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from seed_records import PEAK, llama_finetune, seed001_records, store_at_version

from tui.engine.session import check_run_id
from tui.executors.base import new_run_id
from tui.results.store import SCHEMA_VERSION, ResultStore, StoreError, controller_id
from tui.results.tables import short_id


def test_roundtrip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "results" / "nested" / "fleetperf.sqlite"  # parents are created
    records = seed001_records()
    with ResultStore(path) as store:
        for record in records:
            store.add(record)
        assert store.get("r3") == records[2]
        assert store.get("missing") is None
        assert store.list() == records
    with ResultStore(path) as store:  # a fresh connection reads the same file
        assert store.list() == records
        assert store.get("r4") == records[3]
        assert store.get("r4").hosts == ["gpu-a", "gpu-b"]
        assert store.get("r4").batch_id == "batch-1"


def test_two_open_stores_see_each_others_writes(tmp_path: Path) -> None:
    # The TUI keeps the store open while a cron batch writes to the same file.
    path = tmp_path / "fleetperf.sqlite"
    first, second = seed001_records()[:2]
    with ResultStore(path) as tui_store, ResultStore(path) as batch_store:
        assert tui_store.list() == []
        batch_store.add(first)
        assert tui_store.list() == [first]
        tui_store.add(second)
        assert batch_store.list() == [first, second]


def test_schema_version_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    ResultStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"runs", "metrics"} <= tables
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(StoreError, match="newer"):
        ResultStore(path)


def test_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="junk.sqlite"):
        ResultStore(path)


def test_metrics_table_has_one_row_per_known_metric(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    with ResultStore(path) as store:
        store.add(seed001_records()[2])
    conn = sqlite3.connect(path)
    try:
        rows = dict(conn.execute("SELECT name, value FROM metrics WHERE run_id = 'r3'"))
    finally:
        conn.close()
    assert rows == {
        "e2e_time": 720.8,
        "p_whole": 283.7,
        "p_train": 286.1,
        "p_core": 287.9,
        "acc": 0.912,
        "mem_used_gib": 32.7,
        "mem_total_gib": 40.0,
    }


def test_add_replaces_run_and_its_metrics(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    first = seed001_records()[0]
    rerun = first.model_validate(
        {
            **first.model_dump(),
            "status": "failed",
            "error": "NCCL timeout",
            "metrics": {"e2e_time": 12.5},
        }
    )
    with ResultStore(path) as store:
        store.add(first)
        store.add(rerun)
        assert store.list() == [rerun]
        assert store.get("r1").metrics["p_core"] is None
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert conn.execute("SELECT name FROM metrics").fetchall() == [("e2e_time",)]
    finally:
        conn.close()


def test_list_filters_and_limit(tmp_path: Path) -> None:
    records = seed001_records() + [llama_finetune("l1", {}, {"loss": 1.64})]
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record in reversed(records):  # insertion order does not matter: started does
            store.add(record)
        assert [r.run_id for r in store.list()] == ["r1", "r2", "r3", "r4", "l1"]
        assert [r.run_id for r in store.list(case="distilbert-pytorch", limit=2)] == ["r3", "r4"]
        assert [r.run_id for r in store.list(case="llama2_7b_finetune-pytorch")] == ["l1"]
        assert [r.run_id for r in store.list(batch_id="batch-1")] == ["r4"]
        assert store.list(limit=0) == []
        assert store.list(case="nope") == []


def test_metric_history(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record in seed001_records():
            store.add(record)
        history = store.metric_history("p_core", case="distilbert-pytorch", config="A100x1x8")
        assert [(p.run_id, p.value) for p in history] == [("r1", 1942.6), ("r2", 2181.0)]
        assert store.metric_history("loss") == []
        assert store.metric_history("bogus") == []


def test_failed_add_leaves_store_unchanged(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        record = seed001_records()[0]
        store.add(record)
        broken = record.model_copy(update={"status": "exploded"})  # bypasses validation
        with pytest.raises(sqlite3.IntegrityError):
            store.add(broken)
        assert store.list() == [record]


_WRITER = """
import sys
from seed_records import seed001_records
from tui.results.store import ResultStore
base = seed001_records()[0]
with ResultStore(sys.argv[1]) as store:
    for i in range(int(sys.argv[3])):
        store.add(base.model_copy(update={"run_id": f"{sys.argv[2]}-{i}"}))
"""


def test_two_controllers_writing_at_once_keep_every_record(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "40"], env=env)
        for name in ("cron-a", "cron-b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with ResultStore(path) as store:
        ids = {r.run_id for r in store.list()}
    assert ids == {f"{n}-{i}" for n in ("cron-a", "cron-b") for i in range(40)}
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == 80 * 7
    finally:
        conn.close()


_OPENER = """
import sys, time
from tui.results.store import ResultStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # together, unless loaded
ResultStore(sys.argv[1]).close()
"""


@pytest.mark.slow  # controllers in processes of their own, racing
def test_controllers_opening_a_new_store_at_once_all_get_it(tmp_path: Path) -> None:
    # Each opener switches the new file to WAL; SQLite refuses all but one of them at once
    # ("database is locked") without waiting, which the store must wait out itself.
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    for attempt in range(8):
        path, start = tmp_path / f"store-{attempt}.sqlite", time.time() + 1.2
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _OPENER, str(path), str(start)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, "".join(errors)
        with ResultStore(path) as store:
            assert store.list() == []


def test_a_version_1_store_is_migrated_with_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, batch_id TEXT, case_name TEXT NOT NULL,
            vendor TEXT NOT NULL, config TEXT NOT NULL, chip TEXT NOT NULL,
            nnodes INTEGER NOT NULL, nproc_per_node INTEGER NOT NULL, hosts TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'aborted')),
            error TEXT, started TEXT NOT NULL, finished TEXT NOT NULL, precision TEXT,
            fix_hp TEXT NOT NULL, report_columns TEXT NOT NULL, short_names TEXT NOT NULL,
            notes TEXT NOT NULL, run_dir TEXT);
        CREATE TABLE metrics (run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            name TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY (run_id, name));
        INSERT INTO runs VALUES ('old', NULL, 'distilbert-pytorch', 'cpu', 'CPUx1x1', 'CPU',
            1, 1, '["localhost"]', 'passed', NULL, '2026-11-20T10:00:00Z',
            '2026-11-20T10:05:00Z', 'fp32', '{}', '[]', '{}', '[]', NULL);
        INSERT INTO metrics VALUES ('old', 'p_core', 12.5);
        PRAGMA user_version = 1;
        """
    )
    conn.close()
    with ResultStore(path) as store:
        (old,) = store.list()
        assert old.run_id == "old" and old.metrics["p_core"] == 12.5
        assert old.environment == {} and old.executor is None
        running = old.model_copy(update={"run_id": "new", "status": "running", "finished": None})
        store.add(running)  # the new statuses are allowed now
        assert store.get("new").status == "running"
        assert store.delete("old") and not store.delete("old")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM metrics WHERE run_id = 'old'").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_version_6_store_gains_the_peak_and_keeps_it(tmp_path: Path) -> None:
    """Schema 7: a JSON peak column; a store of version 6 is migrated (its runs' peak null),
    and a run's peak reads back equal."""
    path, first, second = store_at_version(tmp_path, "peak", 6)
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.peak is None
        with_peak = type(second).model_validate({**second.model_dump(), "peak": PEAK})
        store.add(with_peak)
    with ResultStore(path) as store:  # reopened: read from the file
        got = store.get(second.run_id)
        assert got == with_peak and got.peak is not None
        assert got.peak.model_dump() == PEAK
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 7
    finally:
        conn.close()


def test_a_version_7_store_gains_the_config_env_and_keeps_it(tmp_path: Path) -> None:
    """Schema 8: a JSON config_env column; a store of version 7 is migrated (its runs'
    config_env empty), and a run's config_env reads back as written."""
    path, first, second = store_at_version(tmp_path, "config_env", 7)
    env = {"BKCL_FORCE_SYNC": "1", "XPU_FC_AUTOTUNE_FILE": "{data_dir}/t.log", "Q": "{{ x }}"}
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.config_env == {}
        store.add(second.model_copy(update={"config_env": env}))
    with ResultStore(path) as store:  # reopened: read from the file
        assert store.get(second.run_id).config_env == env
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 8
    finally:
        conn.close()


def test_v9_store_gains_monitoring(tmp_path: Path) -> None:
    path, first, second = store_at_version(tmp_path, "monitoring", 9)
    summary = {"hosts": [{"host": "h1", "samples": 3}], "notes": ["no NVML"]}
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.monitoring is None
        store.add(second.model_copy(update={"monitoring": summary}))
    with ResultStore(path) as store:  # reopened: read from the file
        assert store.get(second.run_id).monitoring == summary
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 10
    finally:
        conn.close()


def test_a_version_3_store_gains_the_synthetic_flag(tmp_path: Path) -> None:
    path, first, second = store_at_version(tmp_path, "synthetic_data", 3)
    with ResultStore(path) as store:
        assert store.get(first.run_id) == first and first.synthetic_data is None
        for flag in (True, False):
            store.add(second.model_copy(update={"synthetic_data": flag}))
            assert store.get(second.run_id).synthetic_data is flag


# A controller that creates a run 'running' under its own lease, then, told to on stdin,
# finishes it 'passed' (issue 26 point 9).
_OWNER = """
import sys
from seed_records import seed001_records
from tui.results.store import ResultStore, controller_id
run = seed001_records()[0].model_copy(update={"status": "running", "controller": controller_id()})
with ResultStore(sys.argv[1]) as store:
    store.add(run)
    print("running", flush=True)
    sys.stdin.readline()
    store.add(run.model_copy(update={"status": "passed"}))
"""


def test_only_the_controller_that_created_a_run_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-c", _OWNER, str(path)]
    with subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as owner:
        assert owner.stdout.readline() == "running\n"
        with ResultStore(path) as store:
            theirs = store.get("r1")
            assert theirs.controller != controller_id()  # another process: another lease
            mine = seed001_records()[0].model_copy(update={"controller": controller_id()})
            with pytest.raises(StoreError, match=r"run r1 belongs to another controller"):
                store.add(mine)
            assert store.get("r1") == theirs
            owner.communicate("done\n", timeout=60)
            assert owner.returncode == 0
            assert store.get("r1") == theirs.model_copy(update={"status": "passed"})


def test_run_ids_carry_64_random_bits_and_a_short_form() -> None:
    ids = [new_run_id("distilbert-pytorch") for _ in range(200)]
    tokens = [run_id.rsplit("-", 1)[1] for run_id in ids]
    for run_id, token in zip(ids, tokens, strict=True):
        assert re.fullmatch(r"\d{8}-\d{6}-distilbert-pytorch-[0-9a-f]{16}", run_id)
        check_run_id(run_id, "--prune")  # what prune and results accept
        assert token.startswith(short_id(run_id)) and len(short_id(run_id)) == 6
    assert len(set(tokens)) == len(tokens)


def test_resolve_takes_a_unique_prefix_or_the_tables_short_form(tmp_path: Path) -> None:
    """Issue 29 point 4: the whole id, any unique prefix of it, or the short form the
    tables show (a prefix of the random tail); several matches are refused with them."""
    r1, r2, r3 = seed001_records()[:3]
    one = "20261121-100000-distilbert-pytorch-3fa2c01d9e4b7a65"
    two = "20261121-100000-distilbert-pytorch-3fb7000000000000"
    other = "20261122-090000-glm-pytorch-0a0b0c0d0e0f1011"
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record, run_id in ((r1, one), (r2, two), (r3, other)):
            store.add(record.model_copy(update={"run_id": run_id}))
        assert store.resolve(one) == one
        assert store.resolve(short_id(one)) == one  # what the tables print
        assert store.resolve("3fb") == two
        assert store.resolve("20261122") == other
        assert store.resolve("20261121-100000-distilbert-pytorch-3fa") == one
        with pytest.raises(StoreError) as ambiguous:
            store.resolve("3f")
        assert str(ambiguous.value) == (
            f"run '3f' is ambiguous: 2 runs match ({one}, {two}); give more of the id"
        )
        with pytest.raises(StoreError, match=r"^no run 'fec4' in .*fleetperf\.sqlite$"):
            store.resolve("fec4")
        with pytest.raises(StoreError, match="^no run '' in"):
            store.resolve("")
