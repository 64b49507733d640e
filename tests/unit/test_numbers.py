"""Numbers are finite as written where they enter (issue 39 point 8): `--set`, a vendor
config and case.yaml refuse .nan, .inf, 1e400 (read as inf) and 1e-400 (read as 0, "no
limit" to max_gib) in one line naming the source and the field. Before, .nan passed every
bound (it compares false) and ended as an internal error with a traceback."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from harness.errors import InputError
from harness.yamlfile import read_mapping, yaml_load

from tui.catalog import catalog
from tui.core.errors import CatalogError

CASE = "base-memory-capacity"  # max_gib: 0 means "until an allocation fails"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (".nan", ".nan is not a finite number"),
        (".NaN", ".NaN is not a finite number"),
        ("-.inf", "-.inf is not a finite number"),
        ("1e400", "1e400 is not a finite number"),
        ("-1.5e999", "-1.5e999 is not a finite number"),
        ("1e-400", "1e-400 is too small for a float: it would read as 0"),
        ("2.5E-999", "2.5E-999 is too small for a float: it would read as 0"),
    ],
)
def test_set_refuses_a_number_that_is_not_finite_as_written(value: str, problem: str) -> None:
    with pytest.raises(CatalogError) as err:
        catalog.parse_sets([f"max_gib={value}"])
    assert str(err.value) == f"--set max_gib: {problem}"


def test_set_names_the_item_of_a_list_and_takes_finite_numbers() -> None:
    with pytest.raises(CatalogError, match=r"^--set mmlu\.1: \.nan is not a finite number$"):
        catalog.parse_sets(["mmlu=[1, .nan]"])
    sets = catalog.parse_sets(["a=0.0", "b=0e5", "c=1e-300", "d=-2.5", "e=4", "f=inf"])
    assert sets == {"a": 0.0, "b": 0.0, "c": 1e-300, "d": -2.5, "e": 4, "f": "inf"}


def test_an_integer_no_float_or_python_holds_is_one_line() -> None:
    """10**400 for a float key overflowed float() (a traceback); 5,000 digits are past what
    Python reads as an int (ValueError inside the YAML reader)."""
    case = catalog.load_case(CASE)
    config = catalog.load_config(case, "cpu/CPUx1x1")
    with pytest.raises(CatalogError) as err:
        catalog.resolve(case, config, catalog.parse_sets([f"max_gib=1{'0' * 400}"]))
    assert str(err.value) == "--set: max_gib: expected float like 0.0 (got an integer past 1.8e308)"
    with pytest.raises(CatalogError) as err:
        catalog.parse_sets([f"chunk_mib=1{'0' * 5000}"])
    assert str(err.value) == (
        "--set chunk_mib: 10000000000000000000... (5001 characters) is not a number that can"
        " be read"
    )


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "cases" / CASE, tmp_path / CASE)
    return tmp_path / CASE


def test_a_vendor_config_names_the_file_and_field(tmp_path: Path) -> None:
    path = _copy(tmp_path) / "configs" / "cpu" / "CPUx1x1.yaml"
    text = path.read_text()
    path.write_text(text.replace("overrides:\n", "overrides:\n  max_gib: .nan\n", 1))
    case = catalog.load_case(CASE, tmp_path)
    with pytest.raises(CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x1")
    assert str(err.value) == f"{path}: overrides.max_gib: .nan is not a finite number"
    path.write_text(text + "references:\n  - {metric: mem_capacity_gib, value: 1e-999}\n")
    with pytest.raises(CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x1")
    assert str(err.value) == (
        f"{path}: references.0.value: 1e-999 is too small for a float: it would read as 0"
    )


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("max_gib: {min: 0}", "max_gib: {min: 0, max: .nan}", "bounds.max_gib.max"),
        ("max_gib: {min: 0}", "max_gib: {min: -.inf}", "bounds.max_gib.min"),
        ("max_gib: 0.0 ", "max_gib: 1e999 ", "defaults.max_gib"),
    ],
)
def test_case_yaml_names_the_file_and_field(tmp_path: Path, old: str, new: str, field: str) -> None:
    path = _copy(tmp_path) / "case.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(CatalogError) as err:
        catalog.load_case(CASE, tmp_path)
    assert str(err.value).startswith(f"{path}: {field}: ")
    assert str(err.value).endswith(" is not a finite number")


def test_aliases_are_walked_once() -> None:
    """A chain of aliases that doubles 40 times names 2**40 floats; each node is checked once."""
    lines = ["a0: &a0 [1.5, 1.5]"] + [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 41)]
    started = time.perf_counter()
    data = yaml_load("\n".join(lines))
    assert time.perf_counter() - started < 2
    assert data["a40"][0][1] is data["a39"][1]


@pytest.mark.parametrize("value", [".nan", "1e400", "1e-400"])
def test_batch_refuses_them_with_one_line_and_exit_2(tmp_path: Path, value: str) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    out = fp.batch(CASE, "cpu/CPUx1x1", f"max_gib={value}", timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"fleetperf: error: --set max_gib: {value} is ")
    assert not (tmp_path / "r" / "runs").exists() or not any((tmp_path / "r" / "runs").iterdir())


def test_a_file_is_read_as_a_typed_value_is_and_refused_in_one_line_if_not_utf8(
    tmp_path: Path,
) -> None:
    """Files are parsed by libyaml where PyYAML has it, typed values by PyYAML's own
    parser: the same values, and a file that is not UTF-8 named in one line."""
    text = "lr: 1e-4\nsteps: 0x10\nname: 'a: b'\nlist: [1, .5, ~]\n"
    path = tmp_path / "case.yaml"
    path.write_text(text)
    assert read_mapping(path, "case.yaml") == yaml_load(text)
    assert yaml_load(text)["lr"] == 1e-4
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(InputError, match="^cannot read case.yaml: not UTF-8 text$"):
        read_mapping(path, "case.yaml")
