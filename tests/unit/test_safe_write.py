"""Issue 26, points 6 and 9 (modes): what the controller writes follows no planted link and
is 0600 in a 0700 results directory, whatever the umask (tui/core/safefile.py)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from app_support import make_app, run, seed_store, wait_for
from conftest import Fleetperf

from tui import cli
from tui.app.screens.export import ExportScreen
from tui.app.screens.results import ResultsScreen
from tui.core import safefile
from tui.core.paths import store_path
from tui.executors.hostfiles import HOST_ARCHIVE, unpack_host_files
from tui.results.record import write_result_json
from tui.results.store import ResultStore

SECRET = "root's own file\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A 0600 file outside the directory another user can plant links in."""
    path = tmp_path / "victim"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def assert_written_not_through(path: Path, victim: Path) -> None:
    assert victim.read_text() == SECRET and mode(victim) == 0o600
    assert stat.S_ISREG(path.lstat().st_mode), f"{path} is still a link"
    assert mode(path) == 0o600


@pytest.mark.parametrize("planted", ["temp", "target"])
def test_report_writes_through_no_planted_link(tmp_path: Path, victim: Path, planted: str) -> None:
    results = tmp_path / "results"
    seed_store(results)
    shared = tmp_path / "shared"  # e.g. /tmp: anyone may create names in it
    shared.mkdir()
    out = shared / "report.html"
    link = shared / ".report.html.tmp" if planted == "temp" else out
    link.symlink_to(victim)
    assert cli.main(["report", "--results", str(results), "-o", str(out)]) == 0
    assert_written_not_through(out, victim)
    assert "<!doctype html>" in out.read_text()


def test_app_export_writes_through_no_planted_link(tmp_path: Path, victim: Path) -> None:
    seed_store(tmp_path / "results")
    out = tmp_path / "shared" / "x.md"
    out.parent.mkdir()
    out.symlink_to(victim)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("4")
            await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))
            await pilot.press("e")
            # pushed is not yet composed: under load the buttons come a little later
            await wait_for(pilot, lambda: bool(app.screen.query("#export-md")))
            assert isinstance(app.screen, ExportScreen)
            app.screen.query_one("#export-path").value = str(out)
            await pilot.click("#export-md")
            await wait_for(pilot, lambda: isinstance(app.screen, ResultsScreen))

    run(scenario())
    assert_written_not_through(out, victim)
    assert out.read_text().startswith("### distilbert-pytorch")


def test_result_json_replaces_a_link_at_its_name(tmp_path: Path, victim: Path) -> None:
    from seed_records import seed001_records

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").symlink_to(victim)
    path = write_result_json(seed001_records()[0], tmp_path / "run")
    assert_written_not_through(path, victim)


def _archive(dest: Path, members: dict[str, int]) -> None:
    """A host's files.tar as a host could make it: the modes are the host's choice."""
    dest.mkdir(parents=True)
    with tarfile.open(dest / HOST_ARCHIVE, "w") as tar:
        for name, member_mode in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = 3, member_mode
            tar.addfile(info, io.BytesIO(b"hi\n"))


def test_unpacked_host_files_are_private_and_replace_links(
    tmp_path: Path, victim: Path, umask_022: None
) -> None:
    host = tmp_path / "hosts" / "node1"
    _archive(host, {"stdout.log": 0o644, "stderr.log": 0o777, "events.jsonl": 0o4755})
    (host / "stdout.log").symlink_to(victim)
    unpack_host_files(tmp_path / "hosts")
    assert_written_not_through(host / "stdout.log", victim)
    assert {p.name: mode(p) for p in host.iterdir()} == {
        "stdout.log": 0o600,
        "stderr.log": 0o600,
        "events.jsonl": 0o600,
    }


def test_the_helper_never_follows_and_cleans_up_after_an_error(
    tmp_path: Path, victim: Path, umask_022: None
) -> None:
    (tmp_path / "link").symlink_to(victim)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("link", "dangling"):
        with pytest.raises(FileExistsError):
            safefile.create(tmp_path / name)
    assert not (tmp_path / "nowhere").exists()
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), safefile.replacing(target) as f:
        f.write(b"half")
        raise RuntimeError("cut")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "link", "out.txt", "victim"]
    safefile.write_text(target, "new\n", mode=0o644)
    assert target.read_text() == "new\n" and mode(target) == 0o644
    safefile.make_dirs(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == 0o700


def test_a_batch_run_and_its_report_are_private_whatever_the_umask(
    emitter: Fleetperf, umask_022: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through the play, whose private dir holds the extra vars (a direct run has none).
    monkeypatch.setenv("FLEETPERF_DIRECT", "0")
    out = emitter.batch("emitter", "cpu/CPUx1x1", "steps=2")
    assert out.returncode == 0, out.stdout + out.stderr
    report = emitter.results / "report.html"
    assert cli.main(["report", "--results", str(emitter.results), "-o", str(report)]) == 0
    (run_dir,) = (emitter.results / "runs").iterdir()
    dirs = [emitter.results, emitter.results / "runs", run_dir, run_dir / "ansible-run"]
    dirs += [run_dir / "hosts", *(run_dir / "hosts").iterdir()]
    assert {str(d): mode(d) for d in dirs} == {str(d): 0o700 for d in dirs}
    files = [report, run_dir / "result.json", run_dir / "config.json", run_dir / "events.jsonl"]
    files += [run_dir / "ansible-run" / "env" / "extravars", *(run_dir / "hosts").glob("*/*")]
    with ResultStore(store_path(emitter.results)) as store:  # -wal and -shm while it is open
        assert store.list()
        store_files = sorted(emitter.results.glob("fleetperf.sqlite*"))
        assert [p.name for p in store_files] == [
            "fleetperf.sqlite",
            "fleetperf.sqlite-shm",
            "fleetperf.sqlite-wal",
        ]
        modes = {str(f): mode(f) for f in files + store_files}
    assert len(modes) == 13  # the five host files among them
    assert modes == dict.fromkeys(modes, 0o600)
