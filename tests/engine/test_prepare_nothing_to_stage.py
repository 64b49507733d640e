"""``fleetperf prepare`` of a case that reads no data (issue 42): it says there is nothing
to stage and succeeds, so a script that prepares every case of a suite goes on (it was
"declares no prepare script", exit 2)."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, Fleetperf


def test_prepare_of_a_case_without_data_says_so_and_exits_0(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    out = fp.run("prepare", "base-computation", "--synthetic")
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == (
        "fleetperf prepare: case base-computation: nothing to stage (it reads no data)\n"
    )
    assert not (tmp_path / "data").exists()  # nothing written
