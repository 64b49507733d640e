"""The run record: derived fields, normalisation, what it refuses, its JSON form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from seed_records import (
    DISTILBERT_COLUMNS,
    DISTILBERT_SHORT,
    PEAK,
    distilbert,
    llama_finetune,
    seed001_records,
)

from tui.results.record import (
    INFER_COLUMNS,
    METRIC_KEYS,
    RECORD_KEYS,
    TRAIN_COLUMNS,
    CaseMetric,
    RunRecord,
)
from tui.results.tables import config_label, to_json


def test_record_derives_and_normalises() -> None:
    record = distilbert(
        "x",
        "A100x2x8",
        {},
        (1, 2, 3, 4, 0.5, 1),
        started="2026-11-21T18:00:00.75+08:00",
        error="RuntimeError: boom\n  at step 3\n",
    )
    assert (record.chip, record.nnodes, record.nproc_per_node) == ("A100", 2, 8)
    assert record.started == "2026-11-21T10:00:00Z"
    assert record.error == "RuntimeError: boom; at step 3"
    assert list(record.metrics) == list(METRIC_KEYS)


def test_config_outside_the_pattern_needs_explicit_shape() -> None:
    record = distilbert(
        "x", "local-cpu", {}, (1, 2, 3, 4, 0.5, 1), chip="CPU", nnodes=1, nproc_per_node=2
    )
    assert config_label(record.chip, record.nnodes, record.nproc_per_node) == "CPU单机2卡（1x2）"


@pytest.mark.parametrize(
    "change",
    [
        {"started": "2026-11-21T10:00:00"},  # no UTC offset
        {"status": "ok"},
        {"metrics": {"Throughput": 1.0}},  # a metric no fleetperf could name (issue 39)
        {"columns": ["precision", "speed-up"]},
        {"run_id": "../../../tmp/x/escape"},  # a run id names a directory (issue 39)
        {"config": "A100x1x8", "nproc_per_node": 4},
        {"config": "weird", "chip": "", "nnodes": None, "nproc_per_node": None},
        {"config": "weird", "chip": "CPU", "nnodes": 1, "nproc_per_node": None},
        {"config": "weird", "chip": "CPU", "nnodes": None, "nproc_per_node": 1},
        {"config": "weird", "chip": "CPU", "nnodes": 0, "nproc_per_node": 1},
        {"config": "weird", "chip": "CPU", "nnodes": 1, "nproc_per_node": 0},
        {"fix_hp": {"lr": object()}},
        {"hp": {"lr": float("nan")}},  # JSON has no NaN
        {"environment": {"t": float("inf")}},
        {"case": ""},
        {"vendor": ""},
        {"run_id": ""},
        {"config": ""},
    ],
)
def test_record_rejects(change: dict[str, Any]) -> None:
    fields = seed001_records()[0].model_dump() | change
    with pytest.raises(ValidationError):
        RunRecord(**fields)


def test_non_finite_metric_is_unknown() -> None:
    record = llama_finetune("l", {}, {"loss": float("nan"), "mfu": float("inf")})
    assert record.metrics["loss"] is None
    assert record.metrics["mfu"] is None


def test_json_has_exactly_design_keys() -> None:
    records = seed001_records()
    data = json.loads(to_json(records))
    assert isinstance(data, list) and len(data) == 4
    for item in data:
        assert list(item) == list(RECORD_KEYS)
        assert list(item["metrics"]) == list(METRIC_KEYS)
    assert data[2]["fix_hp"] == {"train_batch_size": 96, "learning_rate": 0.00015}
    assert data[2]["metrics"]["p_core"] == 287.9
    assert data[2]["metrics"]["loss"] is None  # not applicable -> null
    assert data[2]["error"] is None
    assert data[3]["hosts"] == ["gpu-a", "gpu-b"]
    # The JSON record reads back into an equal record (table-only fields re-derived).
    back = RunRecord.model_validate(
        {**data[2], "columns": DISTILBERT_COLUMNS, "short_names": DISTILBERT_SHORT}
    )
    assert back == records[2]


def test_the_record_keeps_what_mfu_divides() -> None:
    """peak: in the JSON record (after environment), read back equal, so mfu can be
    recomputed from the record alone; refused where a figure is not a finite, non-negative
    number or a field is unknown."""
    record = RunRecord.model_validate({**seed001_records()[2].model_dump(), "peak": PEAK})
    data = json.loads(to_json([record]))[0]
    assert data["peak"] == PEAK
    assert list(data).index("peak") == list(data).index("environment") + 1
    assert RunRecord.model_validate({**record.model_dump(), **data}) == record
    assert record.peak is not None and record.peak.model_flops_per_s_per_device / (
        record.peak.datasheet_flops or 1
    ) == pytest.approx(41.8 / 156)
    assert json.loads(to_json(seed001_records()[:1]))[0]["peak"] is None  # none reported
    fields = record.model_dump()
    for bad in (
        {**PEAK, "datasheet_flops": float("inf")},
        {**PEAK, "measured_flops": float("nan")},
        {**PEAK, "measured_flops": -1.0},
        {**PEAK, "peak_flops": 1.0},
        {k: v for k, v in PEAK.items() if k != "math"},
    ):
        with pytest.raises(ValidationError):
            RunRecord(**{**fields, "peak": bad})


def test_a_one_letter_case_and_vendor_are_names() -> None:
    fields = seed001_records()[0].model_dump()
    fields |= {"run_id": "r", "case": "x", "vendor": "y", "config": "z", "nproc_per_node": 1}
    record = RunRecord(**fields)
    assert (record.run_id, record.case, record.vendor, record.config) == ("r", "x", "y", "z")
    assert record.cleaned is False  # only `fleetperf cleanup` marks a run cleaned


def test_default_columns_follow_what_the_run_measured() -> None:
    train = seed001_records()[0].model_dump() | {"columns": []}
    assert RunRecord(**train).columns == list(TRAIN_COLUMNS)
    infer = train | {"metrics": {"p_infer_core": 10.0}}
    assert RunRecord(**infer).columns == list(INFER_COLUMNS)
    # kind: base (no model figure at all): precision, fix_hp and the case's own metrics
    own = CaseMetric(name="mem_bw_gbps", unit="GB/s", higher_is_better=True, meaning="copies")
    base = train | {"case_metrics": [own], "metrics": {"mem_bw_gbps": 12.5, "e2e_time": 3.0}}
    assert RunRecord(**base).columns == ["precision", "fix_hp", "mem_bw_gbps"]
    # a run that ended before measuring anything keeps the training layout
    assert RunRecord(**base | {"metrics": {}}).columns == list(TRAIN_COLUMNS)


@pytest.mark.parametrize(("fmt", "ok"), [("pct", True), (".3f", True), ("d", False), ("q", False)])
def test_a_case_metric_format_is_checked_where_it_is_declared(fmt: str, ok: bool) -> None:
    spec = {"name": "f1", "unit": "fraction", "higher_is_better": True, "meaning": "F1"}
    if ok:
        assert CaseMetric(**spec, fmt=fmt).metric().fmt == fmt
    else:
        with pytest.raises(ValidationError, match="fmt"):
            CaseMetric(**spec, fmt=fmt)
