"""``fleetperf --batch --suite NAME`` end to end: a suite's runs as one batch, through real
ansible-runner; suites in ``fleetperf cases``; the shipped base suite on this machine (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, Fleetperf


@pytest.fixture
def suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A suites directory of its own: FLEETPERF_SUITES_DIR, which the runner passes on."""
    where = tmp_path / "suites"
    where.mkdir()
    monkeypatch.setenv("FLEETPERF_SUITES_DIR", str(where))
    return where


def test_a_suite_runs_its_pairs_on_the_chip_picked_as_one_batch(
    emitter: Fleetperf, suites: Path
) -> None:
    (emitter.cases_dir / "emitter" / "configs" / "nvidia").mkdir()
    (emitter.cases_dir / "emitter" / "configs" / "nvidia" / "A100x1x1.yaml").write_text("{}\n")
    (suites / "tiny.yaml").write_text(
        "description: the emitter twice on cpu, once on nvidia\nruns:\n"
        "  - {case: emitter, config: cpu/CPUx1x1}\n"
        "  - {case: emitter, config: nvidia/A100x1x1}\n"
        "  - {case: emitter, config: cpu/CPUx1x1}\n"
    )
    listed = emitter.run("cases")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-2:] == [
        "tiny  (the emitter twice on cpu, once on nvidia)",
        "    3 run(s) on cpu/CPU, nvidia/A100",
    ]
    # The local inventory has cpu hosts only: --config nvidia is refused, launching nothing;
    # without --config the suite runs the rows it has hosts for and says which it skipped.
    picked = emitter.run("--batch", "--suite", "tiny", "--config", "nvidia")
    assert picked.returncode == 2 and "group 'nvidia'" in picked.stderr, picked.stderr
    sets = ("--set", "steps=3", "--set", "interval_s=0.05")
    out = emitter.run("--batch", "--suite", "tiny", *sets)
    assert out.returncode == 0, out.stdout + out.stderr
    skipped = [line for line in out.stdout.splitlines() if "skipped" in line]
    local = REPO / "inventory" / "local.yml"
    assert skipped == [
        f"== suite tiny: skipped 1 run(s) on nvidia/A100: no host for them in {local}"
    ]
    records = emitter.records()
    assert [(r["config"], r["status"]) for r in records] == [("CPUx1x1", "passed")] * 2
    assert all(r["fix_hp"] == {"steps": 3, "interval_s": 0.05} for r in records)
    assert out.stdout.count("| CPU单机单卡（1x1） | fp32 | steps=3,interval_s=0.05 |") == 2


def test_a_bad_suite_exits_2_with_one_line_and_launches_nothing(
    emitter: Fleetperf, suites: Path
) -> None:
    (suites / "tiny.yaml").write_text("runs: [{case: emitter, config: cpu/CPUx1x9}]\n")
    out = emitter.run("--batch", "--suite", "tiny")
    assert out.returncode == 2
    assert out.stderr == (
        f"fleetperf: error: {suites / 'tiny.yaml'}: runs.0: case emitter: no config"
        " 'cpu/CPUx1x9'; did you mean 'cpu/CPUx1x1'? (known: cpu/CPUx1x1, cpu/CPUx2x1)\n"
    )
    unknown = emitter.run("--batch", "--suite", "tinny")
    assert unknown.returncode == 2
    assert unknown.stderr == (
        "fleetperf: error: unknown suite 'tinny'; did you mean 'tiny'? (known: tiny)\n"
    )
    assert not (emitter.results / "fleetperf.sqlite").exists()


@pytest.mark.slow  # about 75 s on a 2-core host: seven base runs
def test_the_shipped_base_suite_runs_on_cpu(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    # No --config: this machine's inventory has cpu hosts, so the cpu rows run (issue 42)
    out = fp.run("--batch", "--suite", "base", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith(
        "== suite base: skipped 34 run(s) on iluvatar/BI-V100, kunlunxin/R300, nvidia/A100,"
        f" nvidia/H100: no host for them in {REPO / 'inventory' / 'local.yml'}\n"
    )
    ran = sorted((r["case"], f"cpu/{r['config']}", r["status"]) for r in fp.records())
    assert ran == [
        ("base-computation", "cpu/CPUx1x1", "passed"),
        ("base-computation", "cpu/CPUx1x1-bf16", "passed"),
        ("base-computation", "cpu/CPUx1x1-fp64", "passed"),
        ("base-interconnect", "cpu/CPUx1x2", "passed"),
        ("base-interconnect", "cpu/CPUx1x2-p2p", "passed"),
        ("base-memory-bandwidth", "cpu/CPUx1x1", "passed"),
        ("base-memory-capacity", "cpu/CPUx1x1", "passed"),
    ]
    for case in ("base-computation", "base-interconnect", "base-memory-bandwidth"):
        assert f"### {case}" in out.stdout
