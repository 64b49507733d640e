"""``fleetperf peak``: the measured peaks cached under the data root."""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.commands.common import Subcommand
from tui.core.errors import UsageError
from tui.core.paths import default_data_root


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", type=Path, default=None)


def cmd_peak(args: argparse.Namespace) -> int:
    """Print the measured peaks cached under the data root (harness.peak_cache, no torch)."""
    from harness import peak_cache

    path = peak_cache.cache_path(args.data_root or default_data_root())
    try:
        entries = peak_cache.read_entries(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not entries:
        print(f"no measured peaks in {path} (a run measures them)")
        return 0
    print(f"{path}:\n{peak_cache.format_entries(entries)}")
    return 0


COMMAND = Subcommand(
    "peak", "the measured-peak cache (matmul rate, bandwidth)", _arguments, cmd_peak
)
