"""``python -m tui.app``: the app alone (what ``fleetperf serve`` starts per browser tab)."""

import argparse
import sys
from pathlib import Path

from tui.app import main

parser = argparse.ArgumentParser(prog="python -m tui.app", description=__doc__)
parser.add_argument(
    "--read-only",
    action="store_true",
    help="no provisioning, exports only under the results directory (fleetperf serve's default)",
)
# fleetperf serve's -i, --results and --data-root; the store: FLEETPERF_STORE (never argv).
parser.add_argument("-i", "--inventory", type=Path, default=None)
parser.add_argument("--results", type=Path, default=None)
parser.add_argument("--data-root", type=Path, default=None)
args = parser.parse_args()
sys.exit(main(args.read_only, args.inventory, args.results, args.data_root))
