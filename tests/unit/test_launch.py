"""tui/launch.py, the ``fleetperf`` command: its imports run with the collector off, and a
subcommand or --batch runs with it on again (the app: tests/app/test_app_cases.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_a_subcommand_runs_with_the_collector_on(tmp_path: Path) -> None:
    code = (
        "import gc, sys\n"
        "from tui import launch\n"
        f"sys.argv = ['fleetperf', 'results', '--results', {str(tmp_path)!r}]\n"
        "rc = launch.main()\n"
        "assert 'tui.cli' in sys.modules and rc == 2, rc\n"
        "assert gc.isenabled(), 'the collector is still off'\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert f"no results store at {tmp_path}" in out.stderr
