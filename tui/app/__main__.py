"""``python -m tui.app``: the app alone (what ``fleetperf serve`` starts per browser tab)."""

import argparse
import sys

from tui.app import main

parser = argparse.ArgumentParser(prog="python -m tui.app", description=__doc__)
parser.add_argument(
    "--read-only",
    action="store_true",
    help="no provisioning, exports only under the results directory (fleetperf serve's default)",
)
sys.exit(main(parser.parse_args().read_only))
