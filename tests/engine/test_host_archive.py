"""A host's files.tar is the host's data (issue 39 point 6): read as a plain tar only (a
compressed one expanded 276 bytes of bzip2 into a 256 MiB log), within a member count, a
byte count and a header size, each cap noted in the record; an archive that is no tar at
all is a note too, never an exception that ends the run."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from conftest import FIXTURE_CASES, write_inventory

from tui.engine.session import Session
from tui.executors import hostfiles, tracker

MIB = 1 << 20


def _host(tmp_path: Path) -> Path:
    host = tmp_path / "fetched" / "h1"
    host.mkdir(parents=True)
    return host


def _tar(path: Path, members: dict[str, bytes], mode: str = "w", **header: str) -> None:
    """A tar of ``members`` (name -> bytes), in pax format with ``header`` as each member's
    pax records."""
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for name, data in members.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            member.pax_headers = dict(header)
            tar.addfile(member, io.BytesIO(data))


@pytest.mark.parametrize("mode", ["w:bz2", "w:gz", "w:xz"])
def test_a_compressed_archive_is_refused_unread(tmp_path: Path, mode: str) -> None:
    """16 MiB of one byte as stdout.log, compressed to a few KiB: before, tarfile's default
    mode inflated it and the controller wrote the log; now nothing of it is read."""
    host = _host(tmp_path)
    _tar(host / hostfiles.HOST_ARCHIVE, {"exit_code": b"0", "stdout.log": bytes(16 * MIB)}, mode)
    assert (host / hostfiles.HOST_ARCHIVE).stat().st_size < 64 * 1024
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    (note,) = notes
    assert note.startswith("host h1: files.tar is not a plain tar (") and note.endswith(
        "); none kept"
    )
    assert sorted(p.name for p in host.iterdir()) == []  # no file kept, the archive removed


def test_members_past_the_cap_are_left_out_and_noted(tmp_path: Path) -> None:
    host = _host(tmp_path)
    filler = {f"filler-{i}": b"" for i in range(hostfiles.ARCHIVE_MAX_MEMBERS - 1)}
    _tar(host / hostfiles.HOST_ARCHIVE, {"config.json": b"{}", **filler, "exit_code": b"0"})
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert notes == [
        "host h1: files.tar holds more than 1024 members; the rest left out, the limit"
    ]
    assert sorted(p.name for p in host.iterdir()) == ["config.json"]  # exit_code: member 1025


def test_bytes_past_the_cap_are_left_out_and_noted(tmp_path: Path) -> None:
    """A member that says it holds 5 GiB (a sparse file: the test writes no such size):
    before, the controller read the last 64 MiB of it into stdout.log."""
    host = _host(tmp_path)
    archive = host / hostfiles.HOST_ARCHIVE
    _tar(archive, {"exit_code": b"0"})
    member = tarfile.TarInfo("stdout.log")
    member.size = 5 << 30
    with archive.open("r+b") as f:
        f.seek(1024)  # exit_code's header and its block: the end-of-archive blocks after it
        f.write(member.tobuf(tarfile.GNU_FORMAT))
        f.seek(1536 + member.size)
        f.write(bytes(1024))
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert notes == [
        f"host h1: files.tar holds more than {4 << 30} bytes; the rest left out, the limit"
    ]
    assert sorted(p.name for p in host.iterdir()) == ["exit_code"]


def test_an_extended_header_past_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """tarfile reads a pax header whole: one of 1 MiB (it could be gigabytes) is refused by
    its announced size."""
    host = _host(tmp_path)
    _tar(host / hostfiles.HOST_ARCHIVE, {"exit_code": b"0"}, comment="x" * MIB)
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert len(notes) == 1 and notes[0].startswith(
        "host h1: files.tar is not a plain tar (an extended header of 1048"
    ), notes
    assert sorted(p.name for p in host.iterdir()) == []


def test_an_archive_that_is_no_tar_or_cut_short_is_a_note(tmp_path: Path) -> None:
    """Before, tarfile's ReadError left unpack_host_files, and with it the run's conclusion."""
    garbage = _host(tmp_path)
    (garbage / hostfiles.HOST_ARCHIVE).write_bytes(b"no tar here\n" * 100)
    cut = tmp_path / "fetched" / "h2"
    cut.mkdir()
    _tar(cut / hostfiles.HOST_ARCHIVE, {"exit_code": b"0", "stdout.log": b"o" * 10_000})
    whole = (cut / hostfiles.HOST_ARCHIVE).read_bytes()
    (cut / hostfiles.HOST_ARCHIVE).write_bytes(whole[: 4 * 512])  # into stdout.log's data
    notes = hostfiles.unpack_host_files(tmp_path / "fetched")
    assert sorted(notes) == [
        "host h1: files.tar is not a plain tar (invalid header); none kept",
        "host h2: files.tar is unreadable at member 2 (unexpected end of data); the rest left out",
    ]
    assert [p.name for p in garbage.iterdir()] == []
    assert sorted(p.name for p in cut.iterdir()) == ["exit_code"]


def test_the_refusal_reaches_the_run_outcome(tmp_path: Path) -> None:
    """What the record's notes are made of: the outcome of a run whose host returned a
    compressed archive says so, and the run concludes."""
    inventory = write_inventory(tmp_path / "inv.yml", {"box": {"ansible_connection": "local"}})
    session = Session(inventory, tmp_path / "results", tmp_path / "data", FIXTURE_CASES)
    try:
        (plan,) = session.plan([("emitter", "cpu/CPUx1x1")])
        launch = session._launch(plan)
        run = tracker.prepare(launch, lambda _event: None)
        fetched = launch.run_dir / "hosts" / "box"
        fetched.mkdir(parents=True)
        _tar(fetched / hostfiles.HOST_ARCHIVE, {"stdout.log": bytes(MIB)}, "w:bz2")
        outcome = tracker.conclude(launch, run, cancelled=False, rc=0, runner_status="done")
    finally:
        session.close()
    assert any(n.startswith("host box: files.tar is not a plain tar (") for n in outcome.notes), (
        outcome.notes
    )
    assert not (fetched / "stdout.log").exists()
