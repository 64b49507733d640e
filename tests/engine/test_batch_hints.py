"""Hints that lead somewhere (issue 41 point 6): the "see `fleetperf results ID --format
json`" line of a run on another store names that store (without its password); a suite
with no chip on the inventory says so (issue 42: a suite runs the chips it has hosts for)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf
from pgcluster import PASSWORD, USER, Cluster, pg, pg_template  # noqa: F401 (fixtures)

NOTE = ("steps=2", "interval_s=0.05", "env_digest=PATH")  # a note: the hint is printed


def _hinted(out: str) -> list[str]:
    """The command the result line names, as argv after `fleetperf`."""
    found = re.search(r"note\(s\) in the record \((fleetperf results [^)]*)\)", out)
    assert found, out
    return shlex.split(found.group(1))[1:]


def _follow(emitter: Fleetperf, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *argv],
        cwd=REPO,
        env={**emitter.env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_hint_names_the_store_the_run_went_to(emitter: Fleetperf, tmp_path: Path) -> None:
    store = tmp_path / "elsewhere" / "team.sqlite"
    out = emitter.batch("emitter", "cpu/CPUx1x1", *NOTE, args=("--store", str(store)))
    assert out.returncode == 0, out.stdout + out.stderr
    argv = _hinted(out.stdout)
    assert argv[2:] == ["--store", str(store), "--format", "json"]
    shown = _follow(emitter, argv)
    assert shown.returncode == 0 and argv[1] in shown.stdout, shown.stderr


@pytest.mark.slow  # a PostgreSQL cluster and a real batch
def test_the_hint_names_a_postgresql_store_without_its_password(
    emitter: Fleetperf,
    pg: Cluster,  # noqa: F811
) -> None:
    url = pg.create_database("team")
    out = emitter.batch("emitter", "cpu/CPUx1x1", *NOTE, args=("--store", url))
    assert out.returncode == 0, out.stdout + out.stderr
    assert PASSWORD not in out.stdout + out.stderr
    argv = _hinted(out.stdout)
    store = f"postgresql://{USER}@127.0.0.1:{pg.port}/team"
    assert argv[2:] == ["--store", store, "--format", "json"]
    # The operator's password comes from the environment (or ~/.pgpass), not the hint.
    shown = _follow(emitter, argv, PGPASSWORD=PASSWORD)
    assert shown.returncode == 0 and argv[1] in shown.stdout, shown.stderr


def test_a_suite_with_no_chip_on_this_inventory_says_so_and_launches_nothing(
    tmp_path: Path,
) -> None:
    """A suite of nvidia rows only on this machine's cpu inventory: nothing to run (issue 42:
    a suite runs the rows the inventory has hosts for; tests/engine/test_batch_suites.py)."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "gpus.yaml").write_text(
        "runs:\n  - {case: base-computation, config: nvidia/A100x1x8}\n"
        "  - {case: base-computation, config: nvidia/H100x1x8}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "--batch", "--suite", "gpus"],
        cwd=REPO,
        env={
            **os.environ,
            "FLEETPERF_RESULTS": str(tmp_path / "results"),
            "FLEETPERF_SUITES_DIR": str(suites),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"fleetperf: error: inventory {REPO / 'inventory' / 'local.yml'}: no host for any chip"
        " of suite gpus (nvidia/A100, nvidia/H100)\n"
    )
    assert not (tmp_path / "results" / "runs").exists()  # nothing launched
