"""Staging an operator's real files into a data directory (``prepare.py --from``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` as ``dst`` (replacing it), copying where a link cannot cross
    filesystems: a staged checkpoint costs no space and the original is never modified."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)
