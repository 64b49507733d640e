"""``fleetperf qualify`` without a fleet: its bad input (one line, exit 2, nothing
launched), its output (the table, FLAGGED lines, CSV, JSON) from Part A's judge on
synthetic samples, the suite files' qualify: sections, and the verdicts kept in a real
SQLite store with a host's history. The runs on SSH hosts: tests/fleet/test_qualify_fleet.py."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host, write_inventory

from tui.core.errors import CatalogError
from tui.qualify import keep, output
from tui.qualify.judge import Rule, Sample, judge
from tui.qualify.rules import suite_rules
from tui.qualify.run import covariates, shared_machines
from tui.results import qualifications
from tui.results.record import RunRecord
from tui.results.storedb import Target, open_engine

GEMM = "base-computation CPUx1x1 gemm_tflops"
RULE = Rule(GEMM, higher_is_better=True, floor_pct=25)


def _samples(values: dict[str, list[float]], busy: dict[str, str] | None = None) -> list[Sample]:
    return [
        Sample(host, None, GEMM, v, (busy or {}).get(host), None)
        for host, got in values.items()
        for v in got
    ]


def _result(values: dict[str, list[float]], busy: dict[str, str] | None = None) -> output.Result:
    verdicts = judge(_samples(values, busy), {GEMM: RULE}, 3)
    return output.Result("cpu", sorted(values), 3, verdicts, {}, {})


SICK = {
    "node1": [1.00, 1.02, 0.98],
    "node2": [1.01, 0.99, 1.03],
    "node3": [0.31, 0.29, 0.33],
    "node4": [0.97, 1.00, 1.02],
}


def test_a_slow_host_is_one_flagged_line_and_csv_and_json_say_the_same() -> None:
    result = _result(SICK)
    (line,) = output.flag_lines(result)
    assert line.startswith(f"FLAGGED host node3: {GEMM} 0.31× peers (0.29–0.33, 3 samples)")
    table = output.render(result, "md")
    assert f"### {GEMM}" in table and "| node3 | 0.31 | 0.31× | 0.29–0.33 (3) | flagged" in table
    rows = list(csv.DictReader(io.StringIO(output.render(result, "csv"))))
    assert [r["verdict"] for r in rows] == ["ok", "ok", "flagged", "ok"]
    data = json.loads(output.render(result, "json"))
    assert data["flagged"] == [line]
    assert [v["host"] for v in data["verdicts"] if v["verdict"] == "flagged"] == ["node3"]


def test_a_busy_sample_makes_the_slow_host_inconclusive_with_its_reason() -> None:
    result = _result(SICK, busy={"node3": "other processes used 1.5 of 2 CPUs"})
    assert output.flag_lines(result) == []
    (v,) = [v for v in result.verdicts if v.host == "node3"]
    assert v.verdict == "inconclusive" and "other processes used 1.5 of 2 CPUs" in v.reason


def test_a_run_past_its_budget_is_flagged_as_too_slow() -> None:
    line = (
        "FLAGGED link node1 node3: base-interconnect CPUx2x1-p2p too slow:"
        " not done within its budget of 20 s"
    )
    result = replace(_result({h: v for h, v in SICK.items() if h != "node3"}), failures=[line])
    assert output.flag_lines(result) == [line]


def test_the_suites_name_their_judged_metrics() -> None:
    assert suite_rules("base")["gemm_tflops"] == Rule("gemm_tflops", True, 25.0)
    assert set(suite_rules("base-interhost")) == {"bus_gbps", "rank_own_s"}


def test_a_bad_qualify_section_names_the_file_and_field(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "suites" / "base-interhost.yaml").read_text()
    bad = text.replace("floor_pct: 30", "floor_pct: 130")
    (tmp_path / "base-interhost.yaml").write_text(bad)
    with pytest.raises(CatalogError, match=r"base-interhost.yaml: qualify.bus_gbps.floor_pct: "):
        suite_rules("base-interhost", tmp_path)


def test_verdicts_are_kept_and_a_host_is_shown_against_its_own_past(tmp_path: Path) -> None:
    store = str(tmp_path / "fleetperf.sqlite")
    quiet = {h: [1.0, 1.01, 0.99] for h in ("node1", "node2", "node4")}
    keep.save(store, "2026-11-01T00:00:00Z", _result({**quiet, "node3": [1.0, 1.02, 0.98]}))
    keep.save(store, "2026-11-29T00:00:00Z", _result(SICK))
    rows = qualifications.history(store, "node3")
    assert [(r["started"], r["verdict"]) for r in rows] == [
        ("2026-11-01T00:00:00Z", "ok"),
        ("2026-11-29T00:00:00Z", "flagged"),
    ]
    text = output.history_text("node3", rows, "md")
    assert "newest against its own past (1 earlier): -69.0 %" in text
    engine = open_engine(Target(store))  # the schema is the migrations' (HEAD v11)
    engine.dispose()


@pytest.fixture
def fp(tmp_path: Path) -> Fleetperf:
    """fleetperf on the repository's cases (the base cases, no data to stage)."""
    return Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--group", "nvidia"), "--group 'nvidia': no such group with hosts (groups: cpu)"),
        (("--limit", "nodeX"), "--limit 'nodeX': nodeX is not a host of group cpu"),
        (("--repeat", "0"), "--repeat 0: must be at least 1"),
        (("--set", "nosuch=1"), "--set nosuch"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_launched(
    fp: Fleetperf, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    hosts = {name: local_host(fp, name) for name in ("a", "b")}
    inventory = write_inventory(tmp_path / "inv.yml", hosts)
    out = fp.run("qualify", "-i", str(inventory), *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert said in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert not (fp.results / "runs").exists()


def test_an_unreachable_host_is_named_and_nothing_launched(fp: Fleetperf, tmp_path: Path) -> None:
    hosts = {
        "up": local_host(fp, "up"),
        "gone": {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody"},
    }
    inventory = write_inventory(tmp_path / "inv.yml", hosts)
    out = fp.run("qualify", "-i", str(inventory))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("fleetperf qualify: error: host gone: unreachable (")
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (fp.results / "runs").exists()


def test_hosts_sharing_a_boot_id_are_one_machine() -> None:
    ids = {"node1": "b-1", "node2": "b-1", "gpu7": "b-2", "node3": "b-1"}
    assert shared_machines(ids) == [["node1", "node2", "node3"]]
    assert shared_machines({"a": "x", "b": "y"}) == []


def test_a_samples_covariates_come_from_its_record_and_missing_is_quiet() -> None:
    base = {"run_id": "r", "case": "base-computation", "vendor": "cpu", "config": "CPUx1x1"}
    record = RunRecord(**base, status="passed", started="2026-11-29T00:00:00Z")
    assert covariates(record) == (None, None)  # a record from before Part D: quiet
    busy = record.model_copy(
        update={"monitoring": {"busy": "busy: host a: other processes used 1.0 of 2 CPUs"}}
    )
    assert covariates(busy) == ("host a: other processes used 1.0 of 2 CPUs", None)
    noted = record.model_copy(update={"notes": ["throttle: dev0 thermal"]})
    assert covariates(noted) == (None, "dev0 thermal")
