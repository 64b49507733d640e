"""What one host can make the controller hold (issue 26 point 4): recover() reads a host's
events file a line's cap at a time, and every host file is kept within its limit (events
their head, logs their tail), cut on the host before the tar is made and again on the
controller as it unpacks or copies, each cut noted in the record."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from conftest import FIXTURE_CASES, Fleetperf, local_host, write_inventory
from hostmodules import module

from tui.core.events import DROPPED, Event, MetricSample
from tui.core.stream import Reach
from tui.engine.session import Session
from tui.executors import hostfiles, tracker

MIB = 1 << 20
STEP = json.dumps({"t": 1.0, "kind": "step", "rank": 0, "step": 1, "samples": 8}) + "\n"


def _fill(path: Path, mib: int, byte: bytes = b"x") -> None:
    """``mib`` MiB of ``byte`` and no newline appended to path, a MiB at a time."""
    with path.open("ab") as f:
        for _ in range(mib):
            f.write(byte * MIB)


def test_recover_reads_a_huge_tail_in_bounded_memory_and_keeps_a_capped_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case, smaller: a host that shares the controller's files (its follower
    and its copy are the controller's own) writes a line, then 96 MiB without a newline.
    Before: recover() read that tail at once (decoded and split: ~3x its size in memory)
    and the copy in results/runs held all of it."""
    monkeypatch.setenv("FLEETPERF_MAX_EVENTS_MIB", "16")
    inventory = write_inventory(tmp_path / "inv.yml", {"box": {"ansible_connection": "local"}})
    session = Session(inventory, tmp_path / "results", tmp_path / "data", FIXTURE_CASES)
    try:
        (plan,) = session.plan([("emitter", "cpu/CPUx1x1")])
        launch = session._launch(plan)
        seen: list[Event] = []
        run = tracker.prepare(launch, seen.append)
        host_dir = tmp_path / "host-run"
        host_dir.mkdir()
        events = host_dir / "events.jsonl"
        events.write_text(STEP)
        run.start_follower("box", str(events), Reach())
        assert run.followers["box"].drain(len(STEP), 10)
        _fill(events, 96)
        tracemalloc.start()
        try:
            outcome = tracker.conclude(launch, run, cancelled=False, rc=0, runner_status="done")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        session.close()
    assert peak < 8 * MIB, f"recover and the copy held {peak / MIB:.0f} MiB at once"
    copy = launch.run_dir / "hosts" / "box" / "events.jsonl"
    assert copy.stat().st_size == 16 * MIB  # the head: the line, then the tail's start
    assert copy.read_bytes()[: len(STEP)] == STEP.encode()
    assert outcome.notes == [
        f"host box: events.jsonl was {len(STEP) + 96 * MIB} bytes; kept its head"
        f" {16 * MIB} bytes, the limit (FLEETPERF_MAX_EVENTS_MIB)"
    ]
    # The tail became one line over the cap: dropped and counted, the step kept.
    assert dict(DROPPED.take(launch.run_id)) == {"longer than 64 KiB": 1}
    assert [e.step for e in seen if isinstance(e, MetricSample)] == [1]


def test_the_host_cuts_before_the_tar_and_the_controller_notes_it(tmp_path: Path) -> None:
    """fleetperf_collect with the controller's limits: the events keep their head, the logs
    their tail; the tar says each file's whole size, and the record's notes say so."""
    run_dir = tmp_path / "runs" / "run-1"
    run_dir.mkdir(parents=True)
    (run_dir / "events.jsonl").write_text(STEP)
    _fill(run_dir / "events.jsonl", 3, b"e")
    (run_dir / "stdout.log").write_bytes(b"o" * (2 * MIB) + b"the last words\n")
    (run_dir / "exit_code").write_text("0")
    limits = {
        "events.jsonl": {"bytes": MIB, "keep": "head"},
        "stdout.log": {"bytes": MIB, "keep": "tail"},
        "exit_code": {"bytes": 64, "keep": "head"},
    }
    args = {
        "run_dir": str(run_dir),
        "files": ["events.jsonl", "stdout.log", "exit_code"],
        "archive": hostfiles.HOST_ARCHIVE,
        "limits": limits,
    }
    res, _ = module("fleetperf_collect", tmp_path, **args)
    assert res["cut"] == {"events.jsonl": len(STEP) + 3 * MIB, "stdout.log": 2 * MIB + 15}
    fetched = tmp_path / "fetched" / "h1"
    fetched.mkdir(parents=True)
    (Path(res["dir"]) / hostfiles.HOST_ARCHIVE).rename(fetched / hostfiles.HOST_ARCHIVE)
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert (fetched / "events.jsonl").read_bytes() == (STEP.encode() + b"e" * 3 * MIB)[:MIB]
    assert (fetched / "stdout.log").read_bytes() == b"o" * (MIB - 15) + b"the last words\n"
    assert (fetched / "exit_code").read_text() == "0"
    assert sorted(notes) == [
        f"host h1: events.jsonl was {len(STEP) + 3 * MIB} bytes; kept its head {MIB} bytes,"
        " the limit (FLEETPERF_MAX_EVENTS_MIB)",
        f"host h1: stdout.log was {2 * MIB + 15} bytes; kept its tail {MIB} bytes,"
        " the limit (FLEETPERF_MAX_LOG_MIB)",
    ]
    bad, _ = module("fleetperf_collect", tmp_path, **{**args, "limits": {"x": {"bytes": -1}}})
    assert bad["failed"] and "limits.x: expected {bytes: N >= 0, keep: head|tail}" in bad["msg"]


def test_the_controller_caps_what_a_host_sent_whatever_its_tar_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that ignores its limits (or lies in its header): the controller copies no
    more than its own limit of each member."""
    monkeypatch.setenv("FLEETPERF_MAX_LOG_MIB", "1")
    host = tmp_path / "fetched" / "h1"
    host.mkdir(parents=True)
    members = {
        "stderr.log": b"e" * (3 * MIB) + b"Traceback: the end\n",
        "exit_code": b"0" * 1000,
        "config.json": b"{}",
    }
    with tarfile.open(host / hostfiles.HOST_ARCHIVE, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            member.pax_headers = {hostfiles.CUT_HEADER: "not a number"}
            tar.addfile(member, io.BytesIO(data))
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert (host / "stderr.log").read_bytes() == members["stderr.log"][-MIB:]
    assert (host / "exit_code").read_bytes() == b"0" * 64
    assert (host / "config.json").read_bytes() == b"{}"
    assert notes == [
        f"host h1: stderr.log was {3 * MIB + 19} bytes; kept its tail {MIB} bytes,"
        " the limit (FLEETPERF_MAX_LOG_MIB)",
        "host h1: exit_code was 1000 bytes; kept its head 64 bytes, the limit",
    ]


@pytest.mark.parametrize("value", ["abc", "0", "99999999", "١٦"])
def test_a_bad_limit_setting_is_refused_before_anything_starts(
    emitter: Fleetperf, value: str
) -> None:
    env = {**emitter.env(), "FLEETPERF_MAX_EVENTS_MIB": value}
    out = subprocess.run(
        emitter.argv("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr == (
        f"fleetperf: error: FLEETPERF_MAX_EVENTS_MIB={value!r}: expected a whole number of"
        " MiB, 1 to 65536\n"
    )
    assert not (emitter.results / "runs").exists() or not any((emitter.results / "runs").iterdir())


@pytest.mark.slow  # a real run that floods its files
@pytest.mark.parametrize(
    "connection",
    ["local", "{{ 'local' }}"],  # a template: not followed, its files fetched by the play
    ids=["files shared", "files fetched"],
)
def test_a_real_run_that_floods_its_files_is_recorded_with_them_cut(
    emitter: Fleetperf, tmp_path: Path, connection: str
) -> None:
    """The emitter writes its result, then 8 MiB of events without a newline and 8 MiB of
    stdout ending in a line: the run passes; the copies are the limits; the notes say. A
    host whose files the controller copies itself, and one whose play collects them
    (fleetperf_collect with the limits, then the controller's unpack)."""
    script = emitter.cases_dir / "emitter" / "emitter.py"
    flood = (
        "    flood = os.path.join(args.run_dir, 'events.jsonl')\n"
        "    with open(flood, 'ab') as f:\n"
        "        for _ in range(8):\n"
        "            f.write(b'x' * (1 << 20))\n"
        "    for _ in range(8):\n"
        "        sys.stdout.write('o' * (1 << 20))\n"
        "    print('the last words')\n"
        "    return 0\n\n\n"
        'if __name__ == "__main__":'
    )
    text = script.read_text()
    script.write_text(text.replace('    return 0\n\n\nif __name__ == "__main__":', flood))
    host = {**local_host(emitter, "box"), "ansible_connection": connection}
    inventory = write_inventory(tmp_path / "inv.yml", {"box": host})
    env = {**emitter.env(), "FLEETPERF_MAX_EVENTS_MIB": "2", "FLEETPERF_MAX_LOG_MIB": "1"}
    out = subprocess.run(
        emitter.argv(
            "--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "-i", str(inventory)
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (record,) = emitter.records()
    assert record["status"] == "passed"
    hosts = emitter.results / "runs" / str(record["run_id"]) / "hosts" / "box"
    assert (hosts / "events.jsonl").stat().st_size == 2 * MIB
    assert (hosts / "stdout.log").stat().st_size == MIB
    assert (hosts / "stdout.log").read_text().endswith("o" * 100 + "the last words\n")
    cut = [n for n in record["notes"] if "bytes; kept its" in n]  # type: ignore[union-attr]
    assert len(cut) == 2 and "events.jsonl" in cut[0] and "stdout.log" in cut[1], cut
