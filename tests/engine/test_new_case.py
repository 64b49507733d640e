"""``fleetperf new-case NAME``: the written case passes prepare --synthetic and --batch on
cpu/CPUx1x1 as written; bad or taken names are refused before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf

FILES = {
    "case.yaml",
    "configs/cpu/CPUx1x1.yaml",
    "prepare.py",
    "run.py",
    "test_case.py",
}


def _fleetperf(tmp_path: Path) -> Fleetperf:
    cases = tmp_path / "cases"
    cases.mkdir(exist_ok=True)
    return Fleetperf(cases_dir=cases, data_root=tmp_path / "data", results=tmp_path / "results")


def test_writes_the_template_under_its_name(tmp_path: Path) -> None:
    fp = _fleetperf(tmp_path)
    out = fp.run("new-case", "resnet50-pytorch")
    assert out.returncode == 0, out.stderr
    case = fp.cases_dir / "resnet50-pytorch"
    assert {str(p.relative_to(case)) for p in case.rglob("*") if p.is_file()} == FILES
    for rel in FILES:
        text = (case / rel).read_text()
        assert "{{" not in text, rel
    assert "name: resnet50-pytorch" in (case / "case.yaml").read_text()
    listed = fp.run("cases")  # the catalog accepts it as written
    assert listed.returncode == 0, listed.stderr
    assert "resnet50-pytorch  (mlp, synthetic points, training)" in listed.stdout
    assert "cpu/CPUx1x1" in listed.stdout
    lines = (case / "run.py").read_text().splitlines()
    assert len(lines) <= 160


@pytest.mark.parametrize(
    "name", ["Bad", "../x", "a/b", "_x", "x.", "a..b", "harness", "x" * 65, "abc\n", "x\n"]
)
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    fp = _fleetperf(tmp_path)
    out = fp.run("new-case", name)
    assert out.returncode == 2
    assert out.stderr.startswith("fleetperf: error: new-case ") and out.stderr.count("\n") == 1
    assert list(fp.cases_dir.iterdir()) == []
    assert not (tmp_path / "x").exists()


def test_a_taken_name_is_refused_and_left_alone(tmp_path: Path) -> None:
    fp = _fleetperf(tmp_path)
    (fp.cases_dir / "mine").mkdir()
    (fp.cases_dir / "mine" / "run.py").write_text("kept\n")
    out = fp.run("new-case", "mine")
    assert out.returncode == 2 and "already exists" in out.stderr
    assert [p.name for p in (fp.cases_dir / "mine").iterdir()] == ["run.py"]
    assert (fp.cases_dir / "mine" / "run.py").read_text() == "kept\n"


@pytest.mark.slow
def test_the_new_case_prepares_and_runs_as_written(tmp_path: Path) -> None:
    fp = _fleetperf(tmp_path)
    assert fp.run("new-case", "mycase").returncode == 0
    prep = fp.run("prepare", "mycase", "--synthetic")
    assert prep.returncode == 0, prep.stderr
    manifest = json.loads((fp.data_root / "mycase" / "fleetperf-data.json").read_text())
    assert manifest["synthetic"] is True
    out = fp.batch("mycase", "cpu/CPUx1x1", args=("--format", "json"), timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed" and rec["metrics"]["acc"] >= 0.9
    assert rec["metrics"]["p_core"] > 0 and rec["synthetic_data"] is True
    # the case's own test passes too
    test = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider"]
        + [str(fp.cases_dir / "mycase" / "test_case.py")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert test.returncode == 0, test.stdout[-3000:]
