"""``fleetperf prepare CASE``: stage a case's data and checkpoint (its prepare.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tui.catalog import catalog
from tui.commands.common import Subcommand
from tui.core import paths
from tui.core.paths import default_data_root


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("case")
    p.add_argument("--synthetic", action="store_true", help="tiny offline data and model")
    p.add_argument("--from", dest="src", type=Path, help="check and stage a real data dir")
    p.add_argument("--data-root", type=Path, default=None)


def cmd_prepare(case_name: str, synthetic: bool, data_root: Path, src: Path | None) -> int:
    case = catalog.load_case(case_name)
    if not case.prepare:  # a case that reads no data set (the base cases): done already
        print(f"fleetperf prepare: case {case.name}: nothing to stage (it reads no data)")
        return 0
    argv = [sys.executable, str(case.dir / case.prepare), "--out", str(data_root / case.name)]
    if synthetic:
        argv.append("--synthetic")
    if src is not None:
        argv += ["--from", str(src.resolve())]
    env = {**os.environ, "PYTHONPATH": str(paths.HARNESS_DIR)}
    # prepare.py (harness.prepare_main) writes the data manifest the record reads.
    return subprocess.run(argv, env=env, check=False).returncode


COMMAND = Subcommand(
    "prepare",
    "stage a case's data and checkpoint",
    _arguments,
    lambda a: cmd_prepare(a.case, a.synthetic, a.data_root or default_data_root(), a.src),
)
