"""llm-serving's sweep without vLLM (issue 43): the catalog's list values for the keys a
case sweeps, the search for the highest load meeting the SLO, which point the record's
metrics are, and the curve's tokens/s per user."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import REPO
from harness.case import load_case_file
from harness.errors import InputError

from tui.catalog import catalog
from tui.catalog.catalog import CatalogError
from tui.results.curve import curve, per_user
from tui.results.record import RunRecord
from tui.results.report_curve import sections

sys.path.insert(0, str(REPO / "cases" / "llm-serving"))
import sweep  # noqa: E402

CASE = REPO / "cases" / "llm-serving"


def _resolve(*sets: str) -> dict:
    case = catalog.load_case("llm-serving")
    return catalog.resolve(
        case, catalog.load_config(case, "cpu/CPUx1x1"), catalog.parse_sets(list(sets))
    ).hp


def test_a_comma_list_sweeps_a_key_the_case_declares() -> None:
    assert _resolve("concurrency=1,2,4,8")["concurrency"] == [1, 2, 4, 8]
    assert _resolve("request_rate=[1, 2.5]")["request_rate"] == [1, 2.5]
    assert _resolve("concurrency=2")["concurrency"] == 2


@pytest.mark.parametrize(
    ("given", "said"),
    [
        # A key the case does not sweep keeps its text, commas and all (an env digest, a path).
        ("num_prompts=8,16", "--set: num_prompts: expected int like 64 (got '8,16')"),
        (
            "concurrency=1,0,4",
            "--set: concurrency: value 2 of the list: must be at least 1 (got 0)",
        ),
        ("concurrency=1,two", "--set: concurrency: value 2 of the list: expected int like 4"),
        ("request_rate=1,-2", "--set: request_rate: value 2 of the list: must be at least 0"),
        ("concurrency=[]", "--set: concurrency: an empty list"),
    ],
)
def test_a_list_for_another_key_or_a_bad_element_is_refused_naming_the_key(
    given: str, said: str
) -> None:
    with pytest.raises(CatalogError) as err:
        _resolve(given)
    assert str(err.value).startswith(said), err.value
    assert "\n" not in str(err.value)


def test_the_workload_reads_a_swept_config_json_as_the_catalog_wrote_it() -> None:
    case = load_case_file(CASE)
    hp = {**case.defaults, "concurrency": [1, 2, 4], "request_rate": 0}
    assert case.check_hp(json.loads(json.dumps(hp)), "config.json").concurrency == [1, 2, 4]
    with pytest.raises(InputError, match=r"config.json: hp.num_prompts: expected int like 64"):
        case.check_hp({**hp, "num_prompts": [8]}, "config.json")


def test_case_yaml_s_sweep_names_numeric_overridable_keys_only(tmp_path: Path) -> None:
    text = (CASE / "case.yaml").read_text()
    bad = tmp_path / "llm-serving"
    bad.mkdir()
    (bad / "case.yaml").write_text(text.replace("sweep: [concurrency,", "sweep: [engine_python,"))
    with pytest.raises(InputError, match=r"case.yaml: sweep: 'engine_python' is not a numeric"):
        load_case_file(bad)


def _hp(**over: object) -> dict:
    return {**load_case_file(CASE).defaults, **over}


def test_swept_names_the_listed_key_or_the_one_load() -> None:
    assert sweep.swept(_hp(concurrency=[1, 2])) == ("concurrency", [1, 2])
    assert sweep.swept(_hp(request_rate=[0.5, 1.0])) == ("request_rate", [0.5, 1.0])
    assert sweep.swept(_hp(request_rate=2.0)) == ("request_rate", [2.0])
    assert sweep.swept(_hp()) == ("concurrency", [4])
    with pytest.raises(InputError, match="sweep one"):
        sweep.swept(_hp(concurrency=[1, 2], request_rate=[1.0, 2.0]))
    with pytest.raises(InputError, match="find_max_load searches from one concurrency"):
        sweep.swept(_hp(concurrency=[1, 2], find_max_load=1))


def _search(limit: float, start: float, max_points: int = 8, cap: float | None = None):
    tried: list[float] = []

    def meets_at(load: float) -> bool:
        tried.append(load)
        return load <= limit

    return sweep.find_max(start, meets_at, max_points, cap), tried


def test_the_search_doubles_then_bisects_to_the_highest_load_meeting_the_slo() -> None:
    assert _search(5, 1) == (5, [1, 2, 4, 8, 6, 5])
    assert _search(64, 1, cap=16) == (16, [1, 2, 4, 8, 16])  # all requests in flight
    assert _search(5, 1, max_points=3) == (4, [1, 2, 4])
    answer, tried = _search(2.7, 1.0)
    assert tried[:3] == [1.0, 2.0, 4.0] and 2.5 <= answer <= 2.7 and len(tried) <= 8
    assert _search(0.5, 1) == (None, [1])  # even the lowest point misses


def _point(load: float, ratio: float | None, tpot: object = 10.0) -> dict:
    metrics = {"goodput_ratio": ratio, "output_tokens_per_s": 10 * load, "tpot_p90_ms": tpot}
    return {"hp": {"concurrency": load}, "metrics": {**metrics, "ttft_p90_ms": 50.0}}


def test_the_top_level_metrics_are_the_highest_point_meeting_the_slo_else_the_first() -> None:
    points = [_point(1, 1.0), _point(2, 0.95), _point(4, 0.5)]
    assert sweep.reported(points, "concurrency", 0.9)[0] == 1
    best, note = sweep.reported([_point(1, 0.2), _point(2, None)], "concurrency", 0.9)
    assert best == 0 and "the first point's (concurrency 1): no point met the SLO" in note


def _record(points: object) -> RunRecord:
    return RunRecord(
        run_id="r1",
        case="llm-serving",
        vendor="cpu",
        config="CPUx1x1",
        hosts=["localhost"],
        status="passed",
        started="2026-11-29T12:00:00Z",
        precision="fp32",
        points=points,
    )


def test_tokens_per_s_per_user_is_1000_over_p90_tpot_and_never_a_guess() -> None:
    assert per_user(20.0) == 50.0
    assert [per_user(v) for v in (0, 0.0, -1, None, "20", True, float("nan"))] == [None] * 7
    points, skipped = curve(
        _record(
            [
                _point(4, 0.5, tpot=0.0),
                _point(1, 1.0),
                {"hp": {"concurrency": "x"}, "metrics": {}},
                {"hp": {}},
            ]
        )
    )
    assert skipped == 2
    assert [(p.load, p.user_tokens_per_s, p.system_tokens_per_s) for p in points] == [
        (1, 100.0, 10.0),
        (4, None, 40.0),
    ]


def test_the_report_draws_the_curve_of_a_record_with_points_only() -> None:
    html = "".join(sections([_record([_point(1, 1.0), _point(2, 1.0, tpot=20.0)])]))
    assert "Serving curve of run r1" in html and "<svg" in html
    assert "concurrency 2, TTFT p90 50 ms" in html
    assert "".join(sections([_record(None)])) == ""
