"""A suite file's ``qualify:`` section: which of its metrics ``fleetperf qualify`` judges,
which way is better, and the floor (in percent of the peers' median) a host must fall
beyond before it is flagged. Errors name the file and the field."""

from __future__ import annotations

from pathlib import Path

from harness.errors import InputError
from harness.yamlfile import read_mapping

from tui.catalog.suites import load_suite
from tui.core.errors import CatalogError
from tui.core.paths import REPO_ROOT, SUITES_DIR
from tui.core.text import clean_tree
from tui.qualify.judge import Rule

FIELDS = ("higher_is_better", "floor_pct")


def suite_rules(name: str, suites_dir: Path = SUITES_DIR) -> dict[str, Rule]:
    """The rules of suite ``name``'s ``qualify:`` section, by metric name."""
    path = load_suite(name, suites_dir).path
    where = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
    try:
        section = clean_tree(read_mapping(path, where)).get("qualify")
    except InputError as exc:
        raise CatalogError(str(exc)) from None
    if not isinstance(section, dict) or not section:
        raise CatalogError(
            f"{where}: qualify: expected a mapping of metric -> {{{', '.join(FIELDS)}}}"
        )
    return {
        str(metric): _rule(str(metric), entry, f"{where}: qualify.{metric}")
        for metric, entry in section.items()
    }


def _rule(metric: str, entry: object, where: str) -> Rule:
    if not isinstance(entry, dict) or set(entry) != set(FIELDS):
        raise CatalogError(f"{where}: expected exactly {', '.join(FIELDS)}")
    better, floor = entry["higher_is_better"], entry["floor_pct"]
    if not isinstance(better, bool):
        raise CatalogError(f"{where}.higher_is_better: expected true or false, got {better!r}")
    if isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor < 100:
        raise CatalogError(f"{where}.floor_pct: expected a percentage in [0, 100), got {floor!r}")
    return Rule(metric=metric, higher_is_better=better, floor_pct=float(floor))
