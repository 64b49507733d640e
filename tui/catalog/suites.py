"""Suites: a named list of case x config pairs in ``suites/NAME.yaml`` (FlagPerf's test_conf
CASES), run as one batch by ``fleetperf --batch --suite NAME`` (docs/suites.md).

A suite file is ``description:`` (one line) and ``runs:``, a list of ``{case, config}``
with a whole config reference (``cpu/CPUx1x1``). Every case and config is checked when the
suite is read; an error names the suite file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InputError
from harness.yamlfile import did_you_mean, read_mapping

from tui.catalog import catalog
from tui.core.errors import CatalogError
from tui.core.paths import CASES_DIR, REPO_ROOT, SUITES_DIR
from tui.core.text import clean_tree

NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")  # a file name under suites/, never a path
FIELDS = ("description", "runs", "qualify")  # qualify: read by tui/qualify/rules.py


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    pairs: list[tuple[str, str]]  # (case, vendor/config), in the file's order
    path: Path

    @property
    def chips(self) -> list[str]:
        """``vendor/CHIP`` of every run, as ``--config`` picks them."""
        return sorted({_chip(config) for _, config in self.pairs})

    def pick(self, chips: list[str]) -> list[tuple[str, str]]:
        """The runs on these ``VENDOR`` or ``VENDOR/CHIP`` (every run when none is given);
        CatalogError for one the suite has no run on."""
        for chip in chips:
            if not any(_picks(chip, config) for _, config in self.pairs):
                raise CatalogError(
                    f"suite {self.name}: no run on {chip!r} (its chips: {', '.join(self.chips)})"
                )
        return [p for p in self.pairs if not chips or any(_picks(c, p[1]) for c in chips)]


def _chip(config: str) -> str:
    vendor, _, name = config.partition("/")
    match = catalog.CONFIG_NAME.fullmatch(name)
    assert match, config  # load_suite loaded every config
    return f"{vendor}/{match['chip']}"


def _picks(chip: str, config: str) -> bool:
    """Whether ``--config chip`` (a vendor, or vendor/CHIP) takes the run on ``config``."""
    return chip in (config.partition("/")[0], _chip(config))


def suite_names(suites_dir: Path = SUITES_DIR) -> list[str]:
    return sorted(p.stem for p in suites_dir.glob("*.yaml") if NAME.fullmatch(p.stem))


def load_suite(name: str, suites_dir: Path = SUITES_DIR, cases_dir: Path = CASES_DIR) -> Suite:
    path = suites_dir / f"{name}.yaml"
    if not NAME.fullmatch(name) or not path.is_file():
        known = suite_names(suites_dir)
        raise CatalogError(
            f"unknown suite {name!r}{did_you_mean(name, known)}"
            f" (known: {', '.join(known) or 'none'})"
        )
    where = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
    try:
        data = clean_tree(read_mapping(path, where))
    except InputError as exc:
        raise CatalogError(str(exc)) from None
    extra = sorted(str(key) for key in set(data) - set(FIELDS))
    if extra:
        raise CatalogError(f"{where}: {extra[0]}: unknown field (only {', '.join(FIELDS)})")
    description = data.get("description", "")
    if not isinstance(description, str) or "\n" in description.strip():
        raise CatalogError(f"{where}: description: expected one line of text")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise CatalogError(f"{where}: runs: expected a list of {{case, config}}, at least one")
    pairs = [_pair(entry, f"{where}: runs.{i}", cases_dir) for i, entry in enumerate(runs)]
    return Suite(name, description, pairs, path)


def _pair(entry: object, where: str, cases_dir: Path) -> tuple[str, str]:
    """One run of a suite, its case and config loaded as a batch would load them."""
    if not isinstance(entry, dict) or set(entry) != {"case", "config"}:
        raise CatalogError(f"{where}: expected exactly 'case' and 'config'")
    case_name, ref = entry["case"], entry["config"]
    for field, value in (("case", case_name), ("config", ref)):
        if not isinstance(value, str):
            raise CatalogError(f"{where}: {field}: expected a name, got {value!r}")
    try:
        catalog.load_config(catalog.load_case(case_name, cases_dir), ref)
    except CatalogError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    return case_name, ref
