"""The controller's headless paths import neither torch nor textual (issue 6 §1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

HEADLESS = (
    "tui.cli",
    "tui.batch",
    "tui.engine.session",
    "tui.executors.registry",
    "tui.catalog.catalog",
    "tui.core.events",
    "tui.results.record",
    "tui.results.store",
    "tui.results.tables",
)


def test_headless_modules_import_neither_torch_nor_textual() -> None:
    code = (
        f"import sys, {', '.join(HEADLESS)}\n"
        "bad = [m for m in ('torch', 'textual') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_results_and_version_run_without_the_app(tmp_path: Path) -> None:
    # `fleetperf results` and `--version` are headless: no textual even when tui/app exists.
    code = (
        "import sys, contextlib, io\n"
        "from tui import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--version'])\n"
        f"cli.main(['results', '--results', {str(tmp_path)!r}])\n"
        "assert 'textual' not in sys.modules\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert f"no results store at {tmp_path}" in out.stderr
