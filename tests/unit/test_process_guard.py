"""A failing run test leaves nothing running: a planted failure, checked from outside.

An inner pytest runs one test that launches a real run (fleetperf --batch, ansible-playbook,
the emitter workload hanging on purpose) and then fails mid-run. With the suite's process
guard (tests/process_guard.py) nothing of the run survives the inner session; without it,
the same test leaves the playbook and the workload running, which shows the check can fail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

PLANTED = textwrap.dedent(
    """
    import time
    from pathlib import Path

    from conftest import Fleetperf

    def test_planted_failure_mid_run(tmp_path):
        fp = Fleetperf(cases_dir=Path({cases!r}), data_root=Path({data!r}), results=tmp_path)
        proc = fp.popen("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1",
                        "--set", "hang_at_step=2")
        for line in proc.stdout:  # the workload is streaming steps
            if " step " in line:
                break
        assert False, "planted failure while the run is live"
    """
)


def _processes_under(marker: str) -> dict[int, str]:
    """Live processes whose command line or environment mentions ``marker``."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (proc / "environ").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (marker in cmd or marker in env):
            found[int(proc.name)] = cmd
    return found


def _inner_pytest(tmp_path: Path, emitter_dirs: dict[str, str], guard: bool) -> str:
    test_dir = tmp_path / ("guarded" if guard else "unguarded")
    test_dir.mkdir()
    (test_dir / "test_planted.py").write_text(PLANTED.format(**emitter_dirs))
    argv = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider"]
    argv += ["-p", "conftest", "-p", "no:machine_guard"]
    if not guard:
        argv += ["-p", "no:process_guard"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]))
    env["FLEETPERF_DIRECT"] = "0"  # through ansible-playbook: the guard must end it too
    # A module killed mid-poll leaves its AnsiballZ payload dir in the temp dir: ours.
    env["TMPDIR"] = str(tmp_path / "tmp-for-ansible")
    (tmp_path / "tmp-for-ansible").mkdir(exist_ok=True)
    done = subprocess.run(
        [*argv, "--basetemp", str(test_dir / "tmp"), str(test_dir)],
        cwd=test_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the planted failure, and only it
    assert "planted failure while the run is live" in done.stdout
    return str(test_dir)


@pytest.mark.slow
def test_a_failing_run_test_leaves_no_process(emitter, tmp_path: Path) -> None:
    dirs = {"cases": str(emitter.cases_dir), "data": str(emitter.data_root)}
    unguarded = _inner_pytest(tmp_path, dirs, guard=False)
    left = _processes_under(unguarded)
    try:
        assert any("ansible-playbook" in cmd for cmd in left.values()), left
        assert any("emitter.py" in cmd for cmd in left.values()), left
    finally:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    guarded = _inner_pytest(tmp_path, dirs, guard=True)
    time.sleep(1.0)  # anything still alive now was left behind, not on its way out
    assert _processes_under(guarded) == {}
    # What the killed modules left went to the test's own temp dir, not the machine's.
    assert list((tmp_path / "tmp-for-ansible").glob("ansible_*_payload_*"))
