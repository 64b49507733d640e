"""The results store on a real SQLite file and, where the test is about the store's
behaviour rather than the file, on a real PostgreSQL too (tests/pgcluster.py): round trips,
filters, history, migration of every older SQLite schema, and two controllers writing at
once."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import REPO
from pgcluster import pg, pg_template  # noqa: F401 (fixtures)
from seed_records import PEAK, llama_finetune, seed001_records, store_at_version

from tui.engine.session import check_run_id
from tui.executors.base import new_run_id
from tui.results.interrupted import controller_id
from tui.results.store import SCHEMA_VERSION, ResultStore, StoreError
from tui.results.storedb import HEAD, MIGRATIONS, metadata
from tui.results.tables import short_id


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store's location on each backend: a file path, or a new database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "fleetperf.sqlite")
    return request.getfixturevalue("pg").create_database("fleetperf")


def scalars(where: str, sql: str) -> list[object]:
    """The first column of ``sql``'s rows, read past the store (its own driver)."""
    if "://" in where:
        with psycopg.connect(where) as pg_conn:
            return [row[0] for row in pg_conn.execute(sql)]
    conn = sqlite3.connect(where)
    try:
        return [row[0] for row in conn.execute(sql)]
    finally:
        conn.close()


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


def test_roundtrip_on_each_backend(where: str) -> None:
    records = seed001_records()
    with ResultStore(where) as store:
        for record in records:
            store.add(record)
        assert store.get("r3") == records[2]
        assert store.get("missing") is None
    with ResultStore(where) as store:  # a fresh connection reads the same database
        assert store.list() == records
        assert store.get("r4") == records[3]


def test_two_open_stores_see_each_others_writes(where: str) -> None:
    # The TUI keeps the store open while a cron batch writes to the same store.
    first, second = seed001_records()[:2]
    with ResultStore(where) as tui_store, ResultStore(where) as batch_store:
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
        assert tables == {"runs", "metrics", "qualifications", "alembic_version"}
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        ResultStore(path)


def test_the_migrations_make_the_tables_the_store_queries(where: str) -> None:
    """HEAD (what an up-to-date store holds) is the newest revision, and the revisions make
    exactly the tables, columns and indexes of the store's own MetaData."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_heads() == [HEAD]
    ResultStore(where).close()
    url = where.replace("postgresql:", "postgresql+psycopg:") if "://" in where else None
    engine = sa.create_engine(url or f"sqlite:///{where}")
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).all() == [
                (HEAD,)
            ]
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_a_store_of_a_newer_revision_is_refused_unchanged(where: str) -> None:
    ResultStore(where).close()
    if "://" in where:
        with psycopg.connect(where) as conn:
            conn.execute("UPDATE alembic_version SET version_num = 'v99'")
    else:
        conn = sqlite3.connect(where)
        conn.execute("UPDATE alembic_version SET version_num = 'v99'")
        conn.commit()
        conn.close()
    with pytest.raises(StoreError, match=r": schema revision v99 is newer than this fleetperf's"):
        ResultStore(where)
    assert scalars(where, "SELECT version_num FROM alembic_version") == ["v99"]


def test_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="junk.sqlite"):
        ResultStore(path)


def test_metrics_table_has_one_row_per_known_metric(where: str) -> None:
    with ResultStore(where) as store:
        store.add(seed001_records()[2])
    names = scalars(where, "SELECT name FROM metrics WHERE run_id = 'r3' ORDER BY name")
    values = scalars(where, "SELECT value FROM metrics WHERE run_id = 'r3' ORDER BY name")
    assert dict(zip(names, values, strict=True)) == {
        "e2e_time": 720.8,
        "p_whole": 283.7,
        "p_train": 286.1,
        "p_core": 287.9,
        "acc": 0.912,
        "mem_used_gib": 32.7,
        "mem_total_gib": 40.0,
    }


def test_add_replaces_run_and_its_metrics(where: str) -> None:
    first = seed001_records()[0]
    rerun = first.model_validate(
        {
            **first.model_dump(),
            "status": "failed",
            "error": "NCCL timeout",
            "metrics": {"e2e_time": 12.5},
        }
    )
    with ResultStore(where) as store:
        store.add(first)
        store.add(rerun)
        assert store.list() == [rerun]
        assert store.get("r1").metrics["p_core"] is None
    assert scalars(where, "SELECT count(*) FROM runs") == [1]
    assert scalars(where, "SELECT name FROM metrics") == ["e2e_time"]


def test_list_filters_and_limit(where: str) -> None:
    records = seed001_records() + [llama_finetune("l1", {}, {"loss": 1.64})]
    with ResultStore(where) as store:
        for record in reversed(records):  # insertion order does not matter: started does
            store.add(record)
        assert [r.run_id for r in store.list()] == ["r1", "r2", "r3", "r4", "l1"]
        assert [r.run_id for r in store.list(case="distilbert-pytorch", limit=2)] == ["r3", "r4"]
        assert [r.run_id for r in store.list(case="llama2_7b_finetune-pytorch")] == ["l1"]
        assert [r.run_id for r in store.list(batch_id="batch-1")] == ["r4"]
        assert store.list(limit=0) == []
        assert store.list(case="nope") == []
        assert [r.run_id for r in store.list(status="passed", limit=1)] == ["l1"]
        assert [r.metrics["loss"] for r in store.list(limit=1)] == [1.64]  # its own metrics


def test_run_ids_sort_byte_wise_on_each_backend(where: str) -> None:
    # The test cluster's databases sort text as people read it (ICU en-US: "a" < "B");
    # the store's keys sort as SQLite does ("B" < "a"), whatever the locale.
    base = seed001_records()[0]
    with ResultStore(where) as store:
        for run_id in ("a-1", "B-1", "a_1", "b-1"):
            store.add(base.model_copy(update={"run_id": run_id}))
        assert [r.run_id for r in store.list()] == ["B-1", "a-1", "a_1", "b-1"]
        assert [p.run_id for p in store.metric_history("p_core")] == ["B-1", "a-1", "a_1", "b-1"]


def test_metric_history(where: str) -> None:
    with ResultStore(where) as store:
        for record in seed001_records():
            store.add(record)
        history = store.metric_history("p_core", case="distilbert-pytorch", config="A100x1x8")
        assert [(p.run_id, p.value) for p in history] == [("r1", 1942.6), ("r2", 2181.0)]
        assert store.metric_history("loss") == []
        assert store.metric_history("bogus") == []


def test_failed_add_leaves_store_unchanged(where: str) -> None:
    with ResultStore(where) as store:
        record = seed001_records()[0]
        store.add(record)
        broken = record.model_copy(update={"status": "exploded"})  # bypasses validation
        with pytest.raises(sa.exc.IntegrityError):
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


def test_two_controllers_writing_at_once_keep_every_record(where: str) -> None:
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, where, name, "40"], env=env)
        for name in ("cron-a", "cron-b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with ResultStore(where) as store:
        ids = {r.run_id for r in store.list()}
    assert ids == {f"{n}-{i}" for n in ("cron-a", "cron-b") for i in range(40)}
    assert scalars(where, "SELECT count(*) FROM metrics") == [80 * 7]
    if "://" not in where:
        assert scalars(where, "PRAGMA integrity_check") == ["ok"]


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


# The column each hand-migrated schema added: a store of version v lacks those after v.
_ADDED_IN = {
    "hp": 3,
    "synthetic_data": 4,
    "slurm": 5,
    "verdict": 6,
    "peak": 7,
    "config_env": 8,
    "smoke": 9,
    "monitoring": 10,
    "rank_times": 12,  # Alembic's v12
    "points": 13,  # Alembic's v13
}


def _columns(path: Path) -> list[str]:
    return scalars(str(path), "SELECT name FROM pragma_table_info('runs') ORDER BY name")


@pytest.mark.parametrize("version", range(2, 11))
def test_every_older_sqlite_store_is_upgraded_with_its_runs(tmp_path: Path, version: int) -> None:
    """A store as fleetperf of schema ``version`` (2..10, before Alembic) left it: its
    columns then, no alembic_version table. It opens, gains what it lacks and keeps its runs;
    Alembic's baseline is stamped on it, and PRAGMA user_version marks it Alembic's."""
    fresh, path = tmp_path / "fresh.sqlite", tmp_path / "old.sqlite"
    records = seed001_records()
    ResultStore(fresh).close()
    with ResultStore(path) as store:
        for record in records:
            store.add(record)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs RENAME COLUMN executor_detail TO slurm")  # Alembic's v14
    for column, added in _ADDED_IN.items():
        if added > version:
            conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    if version == 2:  # the raw load average, before it was divided per CPU
        conn.execute("ALTER TABLE runs RENAME COLUMN load_per_cpu TO load_avg")
        conn.execute("UPDATE runs SET load_avg = 3.5")
    conn.executescript(  # schema 10 and before had no qualifications table (v11 adds it)
        f"DROP TABLE alembic_version; DROP TABLE qualifications; PRAGMA user_version = {version};"
    )
    conn.close()
    with ResultStore(path) as store:
        assert store.list() == records
        store.add(llama_finetune("l1", {"bs": 1}, {"loss": 1.5}))
        assert store.get("l1").metrics["loss"] == 1.5
    assert _columns(path) == _columns(fresh)
    assert scalars(str(path), "PRAGMA user_version") == [SCHEMA_VERSION]
    assert scalars(str(path), "SELECT version_num FROM alembic_version") == [HEAD]
    assert scalars(str(path), "SELECT count(*) FROM runs WHERE load_per_cpu IS NOT NULL") == [0]


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
from tui.results.store import ResultStore
from tui.results.interrupted import controller_id
run = seed001_records()[0].model_copy(update={"status": "running", "controller": controller_id()})
with ResultStore(sys.argv[1]) as store:
    store.add(run)
    print("running", flush=True)
    sys.stdin.readline()
    store.add(run.model_copy(update={"status": "passed"}))
"""


def test_only_the_controller_that_created_a_run_replaces_it(where: str) -> None:
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, "-c", _OWNER, where]
    with subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as owner:
        assert owner.stdout.readline() == "running\n"
        with ResultStore(where) as store:
            theirs = store.get("r1")
            assert theirs.controller != controller_id()  # another process: another lease
            mine = seed001_records()[0].model_copy(update={"controller": controller_id()})
            with pytest.raises(StoreError, match=r"run r1 belongs to another controller"):
                store.add(mine)
            assert store.get("r1") == theirs
            assert not store.interrupt(mine, "not mine to judge")  # another's lease: kept
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


def test_resolve_takes_a_unique_prefix_or_the_tables_short_form(where: str) -> None:
    """Issue 29 point 4: the whole id, any unique prefix of it, or the short form the
    tables show (a prefix of the random tail); several matches are refused with them."""
    r1, r2, r3 = seed001_records()[:3]
    one = "20261121-100000-distilbert-pytorch-3fa2c01d9e4b7a65"
    two = "20261121-100000-distilbert-pytorch-3fb7000000000000"
    other = "20261122-090000-glm-pytorch-0a0b0c0d0e0f1011"
    with ResultStore(where) as store:
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
        with pytest.raises(StoreError, match=r"^no run 'fec4' in .*fleetperf(\.sqlite)?$"):
            store.resolve("fec4")
        with pytest.raises(StoreError, match="^no run '' in"):
            store.resolve("")


def test_the_command_line_loads_the_store_libraries_only_to_open_a_store() -> None:
    """`fleetperf --help`, `cases` and the app's first screen do not pay for SQLAlchemy
    (0.25 s -> 0.42 s for `import tui.cli` when it was imported at the top)."""
    probe = (
        "import sys, tui.cli, tui.engine.session, tui.batch;"
        " print(sorted(m for m in ('sqlalchemy', 'alembic', 'psycopg') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
