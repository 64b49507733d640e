"""``python -m tui.app``: the app alone (what ``fleetperf serve`` starts per browser tab)."""

import sys

from tui.app import main

sys.exit(main())
