"""Below the front ends (tui/cli.py, tui/commands/, tui/batch.py, tui/app/) nothing prints,
and an internal error is logged: on stderr through logging's last resort in the command
line, to the results directory's app.log in the app, where stderr would be drawn over the
screen."""

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


# The front ends, which alone print (tui/cli.py, tui/commands/, tui/batch.py, tui/app/);
# every other module of tui/ returns values or raises, or writes to a stream a front end
# handed it (qualify's progress).
FRONT_ENDS = ("cli.py", "commands", "batch.py", "app")
PRINTS = re.compile(
    r"\bprint\(|traceback\.print_|print_exc\(|\bsys\.(__)?std(out|err)\b|os\.write\([12],"
)


def prints_below_the_front_ends(root: Path) -> list[str]:
    """Each line of a module under ``root`` (a copy of tui/) outside the front ends that
    prints or reaches for the process's stdout or stderr, as path:line."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in FRONT_ENDS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if PRINTS.search(line):
                found.append(f"{path.relative_to(root)}:{n}")
    return found


def test_nothing_below_the_front_ends_prints() -> None:
    assert all((REPO / "tui" / name).exists() for name in FRONT_ENDS)
    assert prints_below_the_front_ends(REPO / "tui") == []


def test_the_check_finds_a_print_below_the_front_ends(tmp_path: Path) -> None:
    for name, text in {
        "cli.py": "print('usage')\n",
        "commands/store.py": "import sys\nsys.stdout.write('x')\n",
        "qualify/run.py": "def say(line):\n    print(line, flush=True)\n",
        "localfleet/fleet.py": "import sys\ndef main(out=sys.stderr): ...\n",
        "engine/session.py": "import traceback\ntraceback.print_exc()\n",
        "results/store.py": "x = 1\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert prints_below_the_front_ends(tmp_path) == [
        "engine/session.py:2",
        "localfleet/fleet.py:2",
        "qualify/run.py:2",
    ]
