"""Seed configs against the values FlagPerf's own code set (issue 27's conformance rule).

Each ``tests/fixtures/flagperf/<case>.yaml`` was written once by hand from FlagPerf's
files at the commit whose README equals the seed page; it names that commit and, per
fleetperf config, the FlagPerf files read and the values they set (under fleetperf's key
names), and optionally its ``shape`` (nnodes, nproc_per_node). A config whose resolved
hyperparameters drift from them fails here, naming the config, the key and the FlagPerf
file.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from tui.catalog.catalog import load_case, load_config, resolve

FIXTURES = Path(__file__).parents[1] / "fixtures" / "flagperf"


def _fixtures() -> list[tuple[str, str, dict[str, Any]]]:
    rows = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for ref, entry in data["configs"].items():
            rows.append((data["case"], ref, {**entry, "commit": data["commit"]}))
    return rows


def test_every_fixture_names_its_commit_and_sources() -> None:
    for path in sorted(FIXTURES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert data["repository"] == "FlagOpen/FlagPerf", path.name
        assert len(str(data["commit"])) >= 8, path.name
        for ref, entry in data["configs"].items():
            assert entry["sources"], f"{path.name} {ref}: no FlagPerf file named"
            assert entry["hp"], f"{path.name} {ref}: no value"


@pytest.mark.parametrize(
    ("case_name", "ref", "entry"), _fixtures(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_config_matches_flagperf(case_name: str, ref: str, entry: dict[str, Any]) -> None:
    case = load_case(case_name)
    config = load_config(case, ref)
    spec = resolve(case, config)
    for key, want in entry.get("shape", {}).items():  # nnodes, nproc_per_node
        assert getattr(config, key) == want, f"{case_name} {ref}: {key} is not FlagPerf's {want}"
    for key, want in entry["hp"].items():
        got = spec.hp.get(key)
        assert got == want, (
            f"{case_name} {ref}: {key} is {got!r}, FlagPerf {entry['commit']} "
            f"({', '.join(entry['sources'])}) set {want!r}"
        )
