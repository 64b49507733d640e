"""The machine guard (tests/machine_guard.py) fails a session that changes users, groups or
/etc, and names what changed. Each test runs pytest in a subprocess on a tiny test file,
with the guard watching a throwaway directory instead of this machine's /etc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

TOUCHES = """
import os
from pathlib import Path

ETC = Path(os.environ["FLEETPERF_GUARD_ETC"])


def test_provisions_the_machine():
    with (ETC / "passwd").open("a") as f:
        f.write("intruder:x:990:990::/var/lib/intruder:/usr/sbin/nologin\\n")
    group = (ETC / "group").read_text()
    (ETC / "group").write_text(group.replace("docker:x:105:", "docker:x:105:intruder"))
    (ETC / "docker").mkdir()
    (ETC / "docker" / "key.json").write_text("{}")
    (ETC / "hostname").unlink()
"""

QUIET = """
def test_leaves_the_machine_alone(tmp_path):
    (tmp_path / "scratch").write_text("ok")
"""


def etc(tmp_path: Path) -> Path:
    root = tmp_path / "etc"
    root.mkdir()
    (root / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "group").write_text("root:x:0:\ndocker:x:105:\n")
    (root / "hostname").write_text("controller\n")
    (root / "resolv.conf").write_text("nameserver 10.0.0.1\n")
    return root


def guarded_pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_tiny.py").write_text(source)
    env = {
        **os.environ,
        "FLEETPERF_GUARD_ETC": str(etc(tmp_path)),
        "PYTHONPATH": str(TESTS),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "machine_guard", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path / "t"), *args, str(tmp_path / "t" / "test_tiny.py")],
        cwd=tmp_path / "t", env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="one-process"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow),
    ],
)
def test_guard_fails_a_session_that_changes_the_machine(tmp_path, workers):
    done = guarded_pytest(tmp_path, TOUCHES, *workers)
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert "1 passed" in out  # the test itself passed: the guard failed the session
    assert "the tests changed this machine" in out
    root = tmp_path / "etc"
    for line in (
        "passwd: added intruder",
        "group: changed docker",
        f"{root / 'docker'}: added",
        f"{root / 'docker' / 'key.json'}: added",
        f"{root / 'hostname'}: removed",
    ):
        assert line in out, out
    assert out.count("the tests changed this machine") == 1  # the controller only, not workers


@pytest.mark.slow  # an inner pytest session
def test_guard_passes_a_session_that_leaves_the_machine_alone(tmp_path):
    done = guarded_pytest(tmp_path, QUIET)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "changed this machine" not in out


@pytest.mark.slow  # an inner pytest session
def test_guard_ignores_files_that_change_by_themselves(tmp_path):
    source = QUIET + (
        "\n\ndef test_dns(tmp_path):\n"
        "    import os, pathlib\n"
        "    etc = pathlib.Path(os.environ['FLEETPERF_GUARD_ETC'])\n"
        "    (etc / 'resolv.conf').write_text('nameserver 10.0.0.2\\n')\n"
    )
    done = guarded_pytest(tmp_path, source)
    assert done.returncode == 0, done.stdout + done.stderr
