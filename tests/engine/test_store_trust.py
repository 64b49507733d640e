"""The store as a trust boundary (issue 39, points 1-5): a record, a row, an export or a
run directory another controller (or anyone who can write the store) made is data, never
an instruction. Real ansible (stop.yml on this machine), real SQLite, a throwaway
PostgreSQL 15 (tests/pgcluster.py). Another machine is a controller in a UTS namespace of
its own with another host name (``unshare --uts``, root), so its lease names another
machine as a second machine's would."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import REPO, Fleetperf
from pgcluster import Cluster, pg, pg_template  # noqa: F401 (fixtures)
from seed_records import seed001_records

from tui.core import liveness
from tui.engine import attach
from tui.engine.session import Session
from tui.results import report
from tui.results.record import RunRecord
from tui.results.store import ResultStore

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another host name needs root")
OTHER = "machine-b"  # the other machine's host name
LEASE = "from tui.core import liveness; print(liveness.this_controller().text())"


def as_machine(hostname: str | None, argv: list[str]) -> list[str]:
    """``argv`` as a process of the machine called ``hostname`` (None: this one)."""
    if hostname is None:
        return argv
    return ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh", *argv]


def dead_lease(hostname: str | None = None) -> str:
    """The lease of a controller that has ended, on this machine or on ``hostname``."""
    argv = as_machine(hostname, [sys.executable, "-c", LEASE])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def record(run_id: str, controller: str, status: str = "interrupted", **more: object) -> RunRecord:
    """A run of the seeds' distilbert, as another controller's store holds it."""
    base = seed001_records()[0].model_dump()
    fields = {"hosts": ["localhost"], "executor": "process", "finished": None, **more}
    return RunRecord.model_validate(
        {**base, "run_id": run_id, "status": status, "controller": controller, **fields}
    )


def stored(fp: Fleetperf, where: str) -> dict[str, RunRecord]:
    with ResultStore(where) as store:
        return {r.run_id: r for r in store.list()}


def fleetperf(fp: Fleetperf, *args: str, machine: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        as_machine(machine, fp.argv(*args)),
        env=fp.env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# -- 1. a record is data: its run id, inventory and run directory are never obeyed -------


def test_an_export_whose_run_id_is_a_path_is_refused(emitter: Fleetperf, tmp_path: Path) -> None:
    line = record("r1", dead_lease()).model_dump(mode="json") | {"run_id": "../../../tmp/x/esc"}
    dump = tmp_path / "dump.jsonl"
    header = {"format": "fleetperf-store-export", "format_version": 1, "runs": 1}
    dump.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n")
    out = emitter.run("store", "import", str(dump), "--store", str(tmp_path / "s.sqlite"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip().startswith(f"fleetperf: error: {dump} line 2: not a run record")
    assert "run_id" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "s.sqlite").exists() or not stored(emitter, str(tmp_path / "s.sqlite"))


@pytest.mark.slow  # stop.yml through ansible
def test_cleanup_runs_the_operators_inventory_never_the_records(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    script = tmp_path / "inventory.sh"  # what a hostile record names as its inventory
    script.write_text(f"#!/bin/sh\nid > {ran}\necho '{{}}'\n")
    script.chmod(0o755)
    where = str(emitter.results / "fleetperf.sqlite")
    with ResultStore(where) as store:
        store.add(record("r1", dead_lease(), inventory=str(script), run_dir="/etc"))
    out = emitter.run("cleanup")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "cleaned r1: stopped on localhost"
    assert not ran.exists()  # the record's inventory never ran
    assert (emitter.results / "runs" / "r1" / "ansible-cleanup").is_dir()
    assert stored(emitter, where)["r1"].cleaned


@pytest.mark.slow  # stop.yml through ansible
def test_cleanup_never_signals_a_play_that_an_ansible_play_file_names_elsewhere(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "ansible-playbook"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    fake.chmod(0o755)
    elsewhere = tmp_path / "elsewhere" / "ansible-run"  # another tool's play
    unrelated = subprocess.Popen([str(fake), "-e", f"@{elsewhere}/env/extravars", "x.yml"])
    try:
        run_dir = emitter.results / "runs" / "r1"
        run_dir.mkdir(parents=True)
        (run_dir / "ansible-play").write_text(f"{elsewhere}\n")
        where = str(emitter.results / "fleetperf.sqlite")
        with ResultStore(where) as store:
            store.add(record("r1", dead_lease()))
        out = emitter.run("cleanup")
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stderr.strip() == (
            f"fleetperf: run r1: not cleaned: {run_dir}/ansible-play: names"
            f" '{elsewhere}', not a play under {emitter.results}/runs"
        )
        time.sleep(0.5)
        assert unrelated.poll() is None  # never signalled
        assert not stored(emitter, where)["r1"].cleaned
    finally:
        unrelated.kill()
        unrelated.wait()


# -- 3. cleaned only where every host was reached and stopped ---------------------------


@pytest.mark.slow  # stop.yml through ansible
def test_a_host_the_stop_never_reached_is_said_and_the_run_stays_not_cleaned(
    emitter: Fleetperf,
) -> None:
    where = str(emitter.results / "fleetperf.sqlite")
    with ResultStore(where) as store:
        store.add(record("r1", dead_lease(), hosts=["localhost", "nohost"]))
    inventory = REPO / "inventory" / "local.yml"
    out = emitter.run("cleanup", "-i", str(inventory))
    assert out.returncode == 1, out.stdout + out.stderr
    log = emitter.results.resolve() / "runs" / "r1" / "ansible-cleanup"
    assert out.stderr.strip() == (
        "fleetperf: run r1: not cleaned: localhost stopped;"
        f" nohost not reached (not a host of {inventory}) (see {log})"
    )
    assert not stored(emitter, where)["r1"].cleaned


def test_cleanup_refuses_an_inventory_that_is_not_there(emitter: Fleetperf) -> None:
    where = str(emitter.results / "fleetperf.sqlite")
    with ResultStore(where) as store:
        store.add(record("r1", dead_lease()))
    out = emitter.run("cleanup", "-i", "/nonexistent/inventory.yml")
    assert out.returncode == 2, out.stdout + out.stderr
    assert (
        out.stderr.strip() == "fleetperf: error: inventory /nonexistent/inventory.yml: no such file"
    )
    assert not (emitter.results / "runs").exists()  # nothing ran


# -- 1 and 3 on one team store: two machines, each cleans its own ------------------------


@needs_root
@pytest.mark.slow  # four stop.yml runs
def test_two_machines_on_one_postgresql_store_each_clean_only_their_own(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
) -> None:
    url = pg.create_database("team")
    a = emitter
    b = Fleetperf(emitter.cases_dir, emitter.data_root, emitter.results.with_name("results-b"))
    mine, theirs = dead_lease(), dead_lease(OTHER)
    assert liveness.parse(theirs).host == OTHER  # type: ignore[union-attr]
    with ResultStore(url) as store:  # each controller died mid-run: its runs stay running
        for name, lease in (("a", mine), ("b", theirs)):
            store.add(record(f"{name}1", lease, "running"))
            store.add(record(f"{name}2", lease, "running", hosts=["nohost"]))
    # Each machine marks its own runs interrupted (it alone can prove its controller gone).
    for fp, machine in ((a, None), (b, OTHER)):
        out = fleetperf(fp, "results", "--store", url, "--status", "all", machine=machine)
        assert out.returncode == 0, out.stdout + out.stderr
    assert {r.status for r in stored(a, url).values()} == {"interrupted"}

    first = fleetperf(a, "cleanup", "--store", url)
    second = fleetperf(b, "cleanup", "--store", url, machine=OTHER)
    a_pid, b_pid = (liveness.parse(x).pid for x in (mine, theirs))  # type: ignore[union-attr]
    assert first.returncode == 1 and second.returncode == 1  # the nohost runs
    assert first.stdout.splitlines() == [
        "cleaned a1: stopped on localhost",
        f"run b1: held by {OTHER} pid {b_pid}, not touched",
        f"run b2: held by {OTHER} pid {b_pid}, not touched",
    ], first.stdout + first.stderr
    assert first.stderr.startswith("fleetperf: run a2: not cleaned: nohost not reached")
    host = liveness.this_controller().host
    assert second.stdout.splitlines() == [
        f"run a2: held by {host} pid {a_pid}, not touched",
        "cleaned b1: stopped on localhost",
    ], second.stdout + second.stderr
    assert second.stderr.startswith("fleetperf: run b2: not cleaned: nohost not reached")
    records = stored(a, url)
    assert [r.run_id for r in records.values() if r.cleaned] == ["a1", "b1"]
    for fp, own in ((a, "a"), (b, "b")):  # each ran stop.yml for its own runs only
        ran = sorted(p.parent.name for p in (fp.results / "runs").glob("*/ansible-cleanup"))
        assert ran == [f"{own}1", f"{own}2"]


# -- 2. one unreadable row stops nothing ------------------------------------------------


def test_unreadable_rows_are_skipped_and_said_once_newer_metrics_kept(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
) -> None:
    url = pg.create_database("team")
    with ResultStore(url) as store:
        store.add(record("ok1", dead_lease(), "passed", finished="2026-11-21T10:10:00Z"))
        store.add(record("digits", "h:\u00b2", "running"))  # "²".isdigit() is true
        store.add(record("badjson", dead_lease(), "running"))
        store.add(record("nochip", dead_lease()))
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE runs SET hosts = '[not json' WHERE run_id = 'badjson'"))
        conn.execute(sa.text("UPDATE runs SET chip = '', config = 'weird' WHERE run_id = 'nochip'"))
        # A metric a newer fleetperf writes: kept and shown, not refused.
        conn.execute(sa.text("INSERT INTO metrics VALUES ('ok1', 'p_future', 42.5)"))
    engine.dispose()

    out = emitter.run("results", "--store", url, "--status", "all", "--format", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    shown = {r["run_id"]: r for r in json.loads(out.stdout)}
    assert sorted(shown) == ["digits", "ok1"]
    assert shown["ok1"]["metrics"]["p_future"] == 42.5
    lines = out.stderr.splitlines()
    assert [ln for ln in lines if "badjson" in ln] == [
        "fleetperf: run badjson: unreadable record (hosts: not JSON (Expecting value))"
    ]
    assert [ln for ln in lines if "nochip" in ln] == [
        "fleetperf: run nochip: unreadable record (record: config 'weird' is not"
        " CHIPxNNODESxNPROC: give chip, nnodes and nproc_per_node)"
    ]
    table = emitter.run("results", "--store", url, "--format", "csv")
    assert table.returncode == 0, table.stdout + table.stderr
    header, row = table.stdout.splitlines()
    assert header.endswith(",p_future") and row.endswith(",42.5")

    # What each command reads (the interrupted runs; the running ones, at a batch's start).
    batch = ("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "--set", "steps=2")
    for args, unreadable in ((("cleanup",), "nochip"), (batch, "badjson")):
        out = emitter.run(*args, "--store", url)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "Traceback" not in out.stderr
        assert f"fleetperf: run {unreadable}: unreadable record" in out.stderr


def test_a_lease_pid_of_other_digits_is_not_a_lease() -> None:
    assert liveness.parse("h:\u00b2") is None
    assert liveness.parse("h:" + "9" * 5000) is None  # past int()'s digits limit
    assert liveness.parse("h:12") == liveness.Lease("h", 12)


# -- 4. export: one safe write ----------------------------------------------------------


def test_export_never_writes_through_a_link_and_is_private(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    where = str(tmp_path / "s.sqlite")
    with ResultStore(where) as store:
        store.add(record("r1", dead_lease(), "passed"))
    target = tmp_path / "victim"
    target.write_text("keep\n")
    out_file = tmp_path / "dump.jsonl"
    out_file.symlink_to(target)
    old_umask = os.umask(0o022)
    try:
        out = emitter.run("store", "export", "-o", str(out_file), "--store", where)
    finally:
        os.umask(old_umask)
    assert out.returncode == 0, out.stdout + out.stderr
    assert target.read_text() == "keep\n"
    assert not out_file.is_symlink()
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    assert len(out_file.read_text().splitlines()) == 2  # the header, the run


# -- 5. followers: a FIFO or a linked run directory neither hangs nor is followed --------


def _returns(call: object, timeout: float = 5.0) -> bool:
    """Whether ``call()`` returned within ``timeout`` (a daemon thread otherwise)."""
    thread = threading.Thread(target=call, daemon=True)  # type: ignore[arg-type]
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def _unblock(fifo: Path) -> None:
    """A reader blocked opening ``fifo`` (today's code) opens once a writer comes."""
    with contextlib.suppress(OSError):  # no reader: nothing to unblock
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_a_fifo_events_file_neither_hangs_the_follower_nor_the_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    fifo = run_dir / "events.jsonl"
    os.mkfifo(fifo)
    log = attach.RunLog(fifo)
    try:
        assert _returns(lambda: list(log.lines()))
        assert _returns(lambda: report.step_curve(tmp_path, "r1", "loss"))
    finally:
        _unblock(fifo)
        log.close()


def test_a_linked_run_directory_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = {"type": "MetricSample", "host": "h", "step": 1, "loss": 0.5, "kind": "step"}
    (elsewhere / "events.jsonl").write_text(json.dumps(line) + "\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "r1").symlink_to(elsewhere)
    log = attach.RunLog(tmp_path / "runs" / "r1" / "events.jsonl")
    assert list(log.lines()) == []
    assert report.step_curve(tmp_path, "r1", "loss") == []
    assert list(attach.RunLog(elsewhere / "events.jsonl").lines())  # read where it is


def test_closing_a_followed_run_is_bounded(tmp_path: Path) -> None:
    results = tmp_path / "results"
    theirs = liveness.Lease(OTHER, 4242, machine_id="0" * 32).text()
    session = Session(REPO / "inventory" / "local.yml", results, tmp_path / "data")
    session.store.add(record("r1", theirs, "running"))
    (results / "runs" / "r1").mkdir(parents=True)
    fifo = results / "runs" / "r1" / "events.jsonl"
    os.mkfifo(fifo)
    try:
        followed = session.follow("r1", poll_s=0.05)
        time.sleep(0.3)  # the follower has tried the file
        assert _returns(followed.close)
    finally:
        _unblock(fifo)
        session.close()


def test_run_ids_are_checked_where_they_come_in() -> None:
    with pytest.raises(ValueError, match="not a run id"):
        record("../../../tmp/x/escape", dead_lease())
