"""The ``fleetperf`` command: the command line (tui/cli.py), imported with the collector off.

Start-up builds only what lives as long as the process (modules, classes, models), so the
collector finds no garbage in it, yet walks all of it ever more often as it grows: 50 ms of
the app's first paint. tui/cli.py turns it on again as a subcommand or --batch starts, and
the app once its first frame is drawn (FleetperfApp.on_ready)."""

from __future__ import annotations

import gc
import sys


def main() -> int:
    gc.disable()
    from tui.cli import main as command_line  # imported here: after the line above

    return command_line()


if __name__ == "__main__":  # python -m tui.launch, as benchmarks/app_results_scale.py starts it
    sys.exit(main())
