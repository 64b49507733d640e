"""``fleetperf new-case NAME``: a new case folder from tui/templates/newcase/, ready to run.

It writes ``cases/NAME/`` (case.yaml, configs/cpu/CPUx1x1.yaml, prepare.py with a synthetic
path, run.py on the harness's ``Run``, test_case.py) that passes ``fleetperf prepare NAME
--synthetic`` and ``fleetperf --batch --case NAME --config cpu/CPUx1x1`` as written;
docs/new-case.md walks through turning it into a real case.
"""

from __future__ import annotations

import re
from pathlib import Path

from tui.core import paths, safefile
from tui.core.errors import CatalogError

TEMPLATE = Path(__file__).resolve().parent / "templates" / "newcase"
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")  # fullmatch: "$" let a final newline in
RESERVED = {"harness"}


def new_case(name: str, cases_dir: Path = paths.CASES_DIR) -> Path:
    """Write the template as ``cases_dir/name``; CatalogError for a bad or taken name,
    before anything is written."""
    if not NAME.fullmatch(name) or name.endswith((".", "-")) or ".." in name:
        raise CatalogError(
            f"new-case {name!r}: use lower-case letters, digits, '_', '-' and '.' "
            "(up to 64, starting with a letter or digit), e.g. resnet50-pytorch"
        )
    if name in RESERVED:
        raise CatalogError(f"new-case {name!r}: reserved for the harness")
    target = cases_dir / name
    if target.exists() or target.is_symlink():
        raise CatalogError(f"new-case {name!r}: {target} already exists")
    files = sorted(p for p in TEMPLATE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    target.mkdir(parents=True)
    for src in files:
        dst = target / src.relative_to(TEMPLATE)
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text(encoding="utf-8").replace("{{name}}", name)
        safefile.write_text(dst, text, mode=0o644)  # source code: hosts and images read it
    return target
