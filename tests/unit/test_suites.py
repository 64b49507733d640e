"""Suites (tui/catalog/suites.py): the shipped ones, picking a chip, and bad input refused
in one line naming the suite file and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURE_CASES

from tui.batch import BatchArgs, batch_pairs
from tui.catalog import catalog
from tui.catalog.suites import load_suite, suite_names
from tui.core import paths
from tui.core.errors import CatalogError, UsageError


def write_suite(suites: Path, text: str, name: str = "mine") -> Path:
    suites.mkdir(exist_ok=True)
    path = suites / f"{name}.yaml"
    path.write_text(text)
    return path


def refusal(suites: Path, text: str) -> str:
    write_suite(suites, text)
    with pytest.raises(CatalogError) as exc:
        load_suite("mine", suites, FIXTURE_CASES)
    return str(exc.value)


def test_the_shipped_suites_load() -> None:
    assert suite_names() == ["base", "base-interhost", "seeds"]
    for name in suite_names():
        assert load_suite(name).pairs


def test_base_and_base_interhost_hold_every_base_config_once() -> None:
    every = sorted(
        (name, ref)
        for name in catalog.case_names()
        if name.startswith("base-")
        for ref in catalog.config_refs(catalog.load_case(name))
    )
    one, two = load_suite("base").pairs, load_suite("base-interhost").pairs
    assert sorted(one + two) == every
    assert all("x1x" in ref for _, ref in one) and not any("x1x" in ref for _, ref in two)


def test_seeds_is_one_row_of_each_seed_case() -> None:
    seeds = load_suite("seeds")
    assert sorted(case for case, _ in seeds.pairs) == [
        "aquila_33b-inference",
        "distilbert-pytorch",
        "glm-pytorch",
        "llama2_7b-deepspeed",
        "llama2_7b_finetune-pytorch",
    ]
    assert seeds.chips == ["iluvatar/BI-V100", "kunlunxin/R300", "nvidia/A100"]


def test_config_picks_a_vendor_or_a_chip() -> None:
    base = load_suite("base")
    cpu = base.pick(["cpu"])
    assert len(cpu) == 7 and {ref.partition("/")[0] for _, ref in cpu} == {"cpu"}
    h100 = base.pick(["nvidia/H100"])
    assert h100 and all(ref.startswith("nvidia/H100x") for _, ref in h100)
    assert len(base.pick(["nvidia"])) == len(base.pick(["nvidia/A100"])) + len(h100)
    assert base.pick([]) == base.pairs
    with pytest.raises(
        CatalogError, match=r"suite base: no run on 'nvidia/B200' \(its chips: cpu/"
    ):
        base.pick(["nvidia/B200"])


def test_an_unknown_suite_names_the_known_ones(tmp_path: Path) -> None:
    write_suite(tmp_path, "runs: [{case: emitter, config: cpu/CPUx1x1}]\n", "smoke")
    with pytest.raises(
        CatalogError, match=r"unknown suite 'smoek'; did you mean 'smoke'\? \(known: smoke\)"
    ):
        load_suite("smoek", tmp_path, FIXTURE_CASES)
    with pytest.raises(CatalogError, match="unknown suite '../smoke'"):  # a name, never a path
        load_suite("../smoke", tmp_path / "sub", FIXTURE_CASES)


def test_a_suite_in_another_directory(tmp_path: Path) -> None:
    write_suite(
        tmp_path, "description: two\nruns:\n" + "  - {case: emitter, config: cpu/CPUx1x1}\n" * 2
    )
    suite = load_suite("mine", tmp_path, FIXTURE_CASES)
    assert suite.description == "two"
    assert suite.pairs == [("emitter", "cpu/CPUx1x1")] * 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "runs: [{case: emitterr, config: cpu/CPUx1x1}]",
            "runs.0: unknown case 'emitterr'; did you mean 'emitter'?",
        ),
        (
            "runs:\n  - {case: emitter, config: cpu/CPUx1x1}\n"
            "  - {case: emitter, config: cpu/CPUx9x1}",
            "runs.1: case emitter: no config 'cpu/CPUx9x1'",
        ),
        ("runs: [{case: emitter, config: CPUx1x1}]", "runs.0: config 'CPUx1x1': expected VENDOR/"),
        ("runs: [{case: emitter}]", "runs.0: expected exactly 'case' and 'config'"),
        ("runs: [{case: emitter, config: cpu/CPUx1x1, set: x}]", "runs.0: expected exactly"),
        ("runs: [{case: 3, config: cpu/CPUx1x1}]", "runs.0: case: expected a name, got 3"),
        ("runs: [{case: emitter, config: cpu/CPUx1x1, 1: x}]", "runs.0: expected exactly"),
        ("runs: []", "runs: expected a list of {case, config}, at least one"),
        ("description: x", "runs: expected a list"),
        ("runs: [{case: emitter, config: cpu/CPUx1x1}]\nrepeat: 2", "repeat: unknown field"),
        ("runs: [{case: emitter, config: cpu/CPUx1x1}]\n1: 2\n2: 3", "1: unknown field"),
        (
            'description: "a\\nb"\nruns: [{case: emitter, config: cpu/CPUx1x1}]',
            "description: expected one line",
        ),
        (
            "description: [a]\nruns: [{case: emitter, config: cpu/CPUx1x1}]",
            "description: expected one line",
        ),
        ("runs: [", "line 2 not valid YAML"),
        ("- a", "expected a mapping at the top level"),
    ],
)
def test_bad_input_names_the_file_and_the_entry(tmp_path: Path, text: str, message: str) -> None:
    said = refusal(tmp_path, text + "\n")
    assert said.startswith(f"{tmp_path / 'mine.yaml'}:")
    assert message in said
    assert "\n" not in said


def test_a_suite_takes_no_case_beside_it(tmp_path: Path) -> None:
    args = BatchArgs(
        cases=["emitter"],
        configs=[],
        sets=[],
        inventory=paths.DEFAULT_INVENTORY,
        repeat=1,
        results_dir=tmp_path,
        data_root=tmp_path,
        fmt="md",
        suite="base",
    )
    with pytest.raises(UsageError, match="--suite base names its cases: no --case beside it"):
        batch_pairs(args)
