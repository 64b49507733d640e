"""An internal error below the front ends (engine, executors, results) is logged, never
printed: on stderr through logging's last resort in the command line, to the results
directory's app.log in the app, where stderr would be drawn over the screen."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from tui.core import safefile

# An engine module's logger reports a bug as session.py does; with ``app``, the app's
# logging is set up first.
SCRIPT = """
import logging, sys
from pathlib import Path
if sys.argv[1] == "app":
    from tui.app import log_to_file
    log_to_file(Path(sys.argv[2]))
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("tui.engine.session").exception("internal error")
"""


def _bug(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", SCRIPT, *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


def test_the_command_line_shows_an_internal_error_on_stderr() -> None:
    done = _bug("cli")
    assert done.returncode == 0
    assert "internal error" in done.stderr and "ZeroDivisionError" in done.stderr


def test_the_app_keeps_an_internal_error_off_the_screen(tmp_path: Path) -> None:
    done = _bug("app", str(tmp_path / "results"))
    assert done.stderr == ""
    log = tmp_path / "results" / "app.log"
    text = log.read_text()
    assert "tui.engine.session: internal error" in text and "ZeroDivisionError" in text
    assert log.stat().st_mode & 0o777 == 0o600


def test_the_app_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / "app.log").symlink_to(target)
    with pytest.raises(OSError):
        safefile.appending(tmp_path / "app.log")
    assert not target.exists()
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError):  # refused at once, never blocking
        safefile.appending(tmp_path / "fifo")


def test_nothing_below_the_front_ends_prints() -> None:
    found = []
    for layer in ("engine", "executors", "results"):
        for path in sorted((REPO / "tui" / layer).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bprint\(|print_exc\(|sys\.std(out|err)\.write", line):
                    found.append(f"{path.relative_to(REPO)}:{n}")
    assert found == []
