"""JSON-lines data files (one JSON value a line), read with errors that name file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import InputError


def json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """(``"path:line"``, the line's value) for every non-blank line of ``path``; InputError
    naming the file and line where one is not JSON."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{where}: not JSON ({e.msg})") from None
            yield where, value
