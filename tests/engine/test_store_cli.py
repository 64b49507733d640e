"""The store from the command line (issue 31): ``--store`` and FLEETPERF_STORE, two
controllers writing one PostgreSQL store at once, ``results`` and ``report`` over several
stores, ``fleetperf store export|import``. PostgreSQL: a throwaway cluster
(tests/pgcluster.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import Fleetperf
from pgcluster import PASSWORD, USER, Cluster, pg, pg_template  # noqa: F401 (fixtures)
from seed_records import PEAK, seed001_records

from tui.core import liveness
from tui.results.record import Peak
from tui.results.store import ResultStore
from tui.results.verdict import Check, Verdict

STEPS = ("steps=3", "interval_s=0.1")


def other_controller(emitter: Fleetperf, name: str) -> Fleetperf:
    """A second controller: the same cases and data, a results directory (so host run
    roots and leases) of its own."""
    return Fleetperf(emitter.cases_dir, emitter.data_root, emitter.results.with_name(name))


@pytest.mark.slow  # two real batches at once
def test_two_controllers_write_one_postgresql_store_at_once(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
) -> None:
    url = pg.create_database("team")
    second = other_controller(emitter, "results-b")
    batch = ("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--repeat", "2")
    sets = [a for kv in STEPS for a in ("--set", kv)]
    procs = [fp.popen(*batch, *sets, "--store", url) for fp in (emitter, second)]
    outs = [proc.communicate(timeout=300) for proc in procs]
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, out + err
    with ResultStore(url) as store:
        records = store.list()
    assert len(records) == 4 and {r.status for r in records} == {"passed"}
    by_pid: dict[int, int] = {}
    for record in records:
        lease = liveness.parse(record.controller)
        assert lease is not None
        by_pid[lease.pid] = by_pid.get(lease.pid, 0) + 1
        assert record.metrics  # whole: the emitter's metrics stored with the run
    assert by_pid == {procs[0].pid: 2, procs[1].pid: 2}
    for fp in (emitter, second):  # each controller reads every run
        out = fp.run("results", "--store", url, "--status", "all", "--format", "json")
        assert out.returncode == 0, out.stderr
        assert len(json.loads(out.stdout)) == 4
        assert not (fp.results / "fleetperf.sqlite").exists()  # the store was the server
        kept = [p for p in fp.results.rglob("*") if p.is_file()]  # records, logs, artifacts
        assert kept and not [p for p in kept if PASSWORD.encode() in p.read_bytes()]
    assert not [o for pair in outs for o in pair if PASSWORD in o]


def test_a_wrong_password_is_one_line_and_nothing_launches(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
) -> None:
    pg.create_database("team")
    url = pg.url("team", password="not-the-w0rd")
    out = emitter.batch("emitter", "cpu/CPUx1x1", *STEPS, args=("--store", url))
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "not-the-w0rd" not in out.stdout + out.stderr
    assert line.startswith(f"fleetperf: error: postgresql+psycopg://{USER}:***@127.0.0.1:")
    assert "password authentication failed" in line
    assert not emitter.host_dirs() and not (emitter.results / "runs").exists()
    assert out.stdout == ""
    # FLEETPERF_STORE is read the same way
    env = {**emitter.env(), "FLEETPERF_STORE": url}
    argv = emitter.argv("results", "--status", "all")
    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "not-the-w0rd" not in refused.stderr
    assert refused.stderr.count("\n") == 1 and "password authentication failed" in refused.stderr


def _two_stores(tmp_path: Path) -> tuple[Path, Path]:
    """Two sites' SQLite stores: r1..r3 and r3, r4, and r2 again with a later, different
    record."""
    r1, r2, r3, r4 = seed001_records()
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with ResultStore(a) as store:
        for record in (r1, r2, r3):
            store.add(record)
    with ResultStore(b) as store:
        for record in (r3, r4):
            store.add(record)
        store.add(r2.model_copy(update={"finished": "2026-11-22T00:00:00Z", "notes": ["site b"]}))
    return a, b


def test_results_and_report_read_several_stores_as_one(emitter: Fleetperf, tmp_path: Path) -> None:
    a, b = _two_stores(tmp_path)
    stores = ("--store", str(a), "--store", f"sqlite:///{b}")
    out = emitter.run("results", *stores, "--status", "all", "--format", "json")
    assert out.returncode == 0, out.stderr
    runs = {r["run_id"]: r for r in json.loads(out.stdout)}
    assert sorted(runs) == ["r1", "r2", "r3", "r4"]
    assert runs["r2"]["notes"] == ["site b"]  # the newer record
    (note,) = out.stderr.strip().splitlines()
    assert note == (
        f"fleetperf: run r2 is in {a} and {b} with different records: {b}'s, the newer, is shown"
    )
    one = emitter.run("results", *stores, "r4")
    assert one.returncode == 0 and "notes:" in one.stdout
    pruned = emitter.run("results", *stores, "--prune", "--status", "all")
    assert pruned.returncode == 2 and "one store at a time" in pruned.stderr
    page = tmp_path / "report.html"
    report = emitter.run("report", *stores, "-o", str(page))
    assert report.returncode == 0, report.stderr
    assert report.stdout.strip() == f"wrote {page} (4 run(s))"
    missing = emitter.run("results", *stores, "--store", str(tmp_path / "none.sqlite"))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith(f"no results store at {tmp_path / 'none.sqlite'}")
    assert not (tmp_path / "none.sqlite").exists()  # reading never makes one


def test_export_import_skips_what_is_there_and_refuses_a_newer_format(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    a, b = _two_stores(tmp_path)
    dump = tmp_path / "a.jsonl"
    out = emitter.run("store", "export", "--store", str(a), "-o", str(dump))
    assert out.returncode == 0, out.stderr
    header, *lines = dump.read_text().splitlines()
    assert json.loads(header) == {
        "format": "fleetperf-store-export",
        "format_version": 1,
        "schema_revision": "v15",
        "runs": 3,
    }
    assert [json.loads(line)["run_id"] for line in lines] == ["r1", "r2", "r3"]
    into = emitter.run("store", "import", str(dump), "--store", str(b))
    assert into.returncode == 1  # r2 differs: b's record kept
    assert into.stdout.strip() == (
        f"imported 1 run(s) into {b}; 1 already there (identical),"
        " 1 already there with another record"
    )
    assert into.stderr.strip() == f"fleetperf: run r2: kept {b}'s record"
    with ResultStore(b) as store:
        kept = store.get("r2")
        assert kept is not None and kept.notes == ["site b"]
        assert len(store.list()) == 4
    newer = tmp_path / "newer.jsonl"
    newer.write_text(header.replace('"format_version": 1', '"format_version": 2') + "\n")
    refused = emitter.run("store", "import", str(newer), "--store", str(b))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"fleetperf: error: {newer} line 1: export format version 2 is newer than this"
        " fleetperf's (1); upgrade fleetperf"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([header, lines[0], '{"run_id": "x"}', lines[2]]) + "\n")
    refused = emitter.run("store", "import", str(bad), "--store", str(tmp_path / "c.sqlite"))
    assert refused.returncode == 2 and f"{bad} line 3: not a run record" in refused.stderr
    with ResultStore(tmp_path / "c.sqlite") as store:
        assert store.list() == []  # nothing stored from a file with a bad line


def test_a_round_trip_sqlite_jsonl_postgresql_jsonl_is_equal(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    a, _ = _two_stores(tmp_path)
    r4 = seed001_records()[3]
    whole = r4.model_copy(  # the objects a record holds, each filled
        update={
            "peak": Peak.model_validate(PEAK),
            "monitoring": {"hosts": {"gpu-a": {"cpu_pct": {"avg": 12.5, "max": 40.0}}}},
            "verdict": Verdict(
                checks=[
                    Check(
                        metric="p_whole",
                        value=3531.1,
                        low=3000.0,
                        high=None,
                        source="history",
                        basis="3 runs",
                        flagged=False,
                    )
                ],
                notes=["no reference"],
            ),
            "notes": ["n\u00e9 \u0000 zero"],
        }
    )
    with ResultStore(a) as store:
        store.add(whole)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    url = pg.create_database("team")
    steps = [
        ("store", "export", "--store", str(a), "-o", str(first)),
        ("store", "import", str(first), "--store", url),
        ("store", "export", "--store", url, "-o", str(second)),
    ]
    for step in steps:
        out = emitter.run(*step)
        assert out.returncode == 0, out.stderr
    assert second.read_bytes() == first.read_bytes()
    assert len(first.read_text().splitlines()) == 5


def test_the_store_from_the_option_the_environment_or_the_settings_file(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    a, b = _two_stores(tmp_path)
    settings = tmp_path / "config" / "fleetperf" / "store"
    settings.parent.mkdir(parents=True)
    settings.write_text(f"# the team's store\n\nsqlite:///{a}\n")
    env = {**emitter.env(), "XDG_CONFIG_HOME": str(tmp_path / "config")}

    def run_ids(*args: str, **more: str) -> list[str]:
        argv = emitter.argv("results", "--status", "all", "--format", "json", *args)
        out = subprocess.run(argv, env={**env, **more}, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return [r["run_id"] for r in json.loads(out.stdout)]

    assert run_ids() == ["r1", "r2", "r3"]  # the settings file's
    assert run_ids(FLEETPERF_STORE=str(b)) == ["r2", "r3", "r4"]  # the environment first
    assert run_ids("--store", str(b)) == ["r2", "r3", "r4"]  # the option before both
    # before the subcommand too: the option the app and --batch take
    argv = emitter.argv("--store", str(b), "store", "export")
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["runs"] == 3
    settings.write_bytes(b"\xff\n")  # read only where neither names the store
    out = subprocess.run(
        emitter.argv("results"), env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert out.stderr == (
        f"fleetperf: error: {settings}: cannot read the store's setting (not UTF-8 text)\n"
    )
