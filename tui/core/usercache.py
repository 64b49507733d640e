"""What the controller keeps between runs to skip work it already did: JSON entries in the
user's cache directory ($XDG_CACHE_HOME/fleetperf), 0600 in a 0700 directory
(tui/core/safefile.py), each named ``<kind>-<key>.json`` where the key is a hash of what
the entry depends on. An entry that is missing or damaged is a miss: the caller does the
work again. Entries are disposable, so each write drops the kind's oldest beyond ``KEEP``:
the directory does not grow with every edit of what they depend on."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from tui.core import safefile

KEEP = 8  # entries kept per kind: a few inventories or cases in use at once


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fleetperf"


def entry(kind: str, key: str) -> Path:
    return cache_dir() / f"{kind}-{key}.json"


def read(kind: str, key: str) -> Any | None:
    """The entry's JSON, None where it is missing or damaged (the user clearing their cache,
    a write cut short)."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(entry(kind, key).read_text())
    return None


def write(kind: str, key: str, value: Any) -> None:
    """Keep ``value`` under the key; then drop the kind's entries beyond the newest KEEP."""
    path = entry(kind, key)
    safefile.make_dirs(path.parent)
    safefile.write_text(path, json.dumps(value))
    prune(kind)


def prune(kind: str, keep: int = KEEP) -> None:
    """Remove the kind's entries but the ``keep`` most recently written."""
    aged = []
    for path in cache_dir().glob(f"{kind}-*.json"):
        with contextlib.suppress(OSError):  # removed meanwhile by another controller
            aged.append((path.stat().st_mtime_ns, path))
    for _, path in sorted(aged, reverse=True)[keep:]:
        path.unlink(missing_ok=True)
