"""Results store (real SQLite file) and the tables, checked against the seeds' rows."""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tui.results import (
    METRIC_KEYS,
    RECORD_KEYS,
    SCHEMA_VERSION,
    ResultStore,
    RunRecord,
    StoreError,
    config_label,
    format_fix_hp,
    to_csv,
    to_json,
    to_markdown,
)

REPO = Path(__file__).resolve().parents[1]

DISTILBERT_COLUMNS = [
    "precision",
    "fix_hp",
    "e2e_time",
    "p_whole",
    "p_train",
    "p_core",
    "acc",
    "mem",
]
DISTILBERT_SHORT = {"train_batch_size": "bs", "learning_rate": "lr", "max_seq_length": "seq"}


def distilbert(
    run_id: str, config: str, fix_hp: dict[str, Any], numbers: tuple[float, ...], **extra: Any
) -> RunRecord:
    """A seed 001 row: e2e_time, p_whole, p_train, p_core, acc, mem used (of 40 GiB)."""
    e2e, p_whole, p_train, p_core, acc, mem = numbers
    fields: dict[str, Any] = {
        "run_id": run_id,
        "case": "distilbert-pytorch",
        "vendor": "nvidia",
        "config": config,
        "hosts": ["gpu-a"],
        "status": "passed",
        "started": "2026-11-21T10:00:00Z",
        "finished": "2026-11-21T10:20:00Z",
        "precision": "fp32",
        "fix_hp": fix_hp,
        "metrics": {
            "e2e_time": e2e,
            "p_whole": p_whole,
            "p_train": p_train,
            "p_core": p_core,
            "acc": acc,
            "mem_used_gib": mem,
            "mem_total_gib": 40.0,
        },
        "columns": DISTILBERT_COLUMNS,
        "short_names": DISTILBERT_SHORT,
    }
    fields.update(extra)
    return RunRecord(**fields)


def seed001_records() -> list[RunRecord]:
    bs_lr = {"train_batch_size": 96, "learning_rate": 0.00015}
    return [
        distilbert("r1", "A100x1x8", {}, (361, 1764.0, 1861.9, 1942.6, 0.915, 13.9)),
        distilbert(
            "r2",
            "A100x1x8",
            {"train_batch_size": 96},
            (334.7, 2019.1, 2135.8, 2181.0, 0.908, 33.4),
            started="2026-11-21T11:00:00Z",
            finished="2026-11-21T11:10:00Z",
        ),
        distilbert(
            "r3",
            "A100x1x1",
            bs_lr,
            (720.8, 283.7, 286.1, 287.9, 0.912, 32.7),
            started="2026-11-21T12:00:00Z",
            finished="2026-11-21T12:15:00Z",
        ),
        distilbert(
            "r4",
            "A100x2x8",
            {"train_batch_size": 96},
            (58.9, 3531.1, 3892.3, 4058.3, 0.911, 32.9),
            hosts=["gpu-a", "gpu-b"],
            started="2026-11-21T13:00:00Z",
            finished="2026-11-21T13:05:00Z",
            batch_id="batch-1",
        ),
    ]


def llama_finetune(run_id: str, fix_hp: dict[str, Any], metrics: dict[str, Any]) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        case="llama2_7b_finetune-pytorch",
        vendor="nvidia",
        config="A100x1x1",
        hosts=["gpu-a"],
        status="passed",
        started="2026-11-22T08:00:00Z",
        finished="2026-11-22T09:00:00Z",
        precision="fp32",
        fix_hp=fix_hp,
        metrics=metrics,
        columns=["fix_hp", "token/p/s", "loss", "mem", "acc(MMLU)", "MFU"],
        short_names={"precision": "数据精度"},
    )


def inference(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        case="aquila_33b-inference",
        vendor="nvidia",
        config="A100x1x8",
        hosts=["gpu-a"],
        status="passed",
        started="2026-11-22T10:00:00Z",
        finished="2026-11-22T10:41:20Z",
        precision="fp16",
        metrics={
            "e2e_time": 2479.9,
            "p_infer_whole": 8711,
            "p_infer_core": 8724,
            "mfu": 0.238,
            "loss": 3.0075,
            "mem_used_gib": 12.3,
            "mem_total_gib": 40.0,
        },
        columns=[
            "precision",
            "e2e_time",
            "p_val_whole",
            "p_val_core",
            "p_infer_whole",
            "p_infer_core",
            "mfu",
            "loss",
            "mem",
        ],
    )


# --- store --------------------------------------------------------------------------


def test_roundtrip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "results" / "nested" / "fleetperf.sqlite"  # parents are created
    records = seed001_records()
    with ResultStore(path) as store:
        for record in records:
            store.add(record)
        assert store.get("r3") == records[2]
        assert store.get("missing") is None
        assert store.list() == records
    with ResultStore(path) as store:  # a fresh connection reads the same file
        assert store.list() == records
        assert store.get("r4") == records[3]
        assert store.get("r4").hosts == ["gpu-a", "gpu-b"]
        assert store.get("r4").batch_id == "batch-1"


def test_two_open_stores_see_each_others_writes(tmp_path: Path) -> None:
    # The TUI keeps the store open while a cron batch writes to the same file.
    path = tmp_path / "fleetperf.sqlite"
    first, second = seed001_records()[:2]
    with ResultStore(path) as tui_store, ResultStore(path) as batch_store:
        assert tui_store.list() == []
        batch_store.add(first)
        assert tui_store.list() == [first]
        tui_store.add(second)
        assert batch_store.list() == [first, second]


def test_schema_version_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    ResultStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"runs", "metrics"} <= tables
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(StoreError, match="newer"):
        ResultStore(path)


def test_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="junk.sqlite"):
        ResultStore(path)


def test_metrics_table_has_one_row_per_known_metric(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    with ResultStore(path) as store:
        store.add(seed001_records()[2])
    conn = sqlite3.connect(path)
    try:
        rows = dict(conn.execute("SELECT name, value FROM metrics WHERE run_id = 'r3'"))
    finally:
        conn.close()
    assert rows == {
        "e2e_time": 720.8,
        "p_whole": 283.7,
        "p_train": 286.1,
        "p_core": 287.9,
        "acc": 0.912,
        "mem_used_gib": 32.7,
        "mem_total_gib": 40.0,
    }


def test_add_replaces_run_and_its_metrics(tmp_path: Path) -> None:
    path = tmp_path / "fleetperf.sqlite"
    first = seed001_records()[0]
    rerun = first.model_validate(
        {
            **first.model_dump(),
            "status": "failed",
            "error": "NCCL timeout",
            "metrics": {"e2e_time": 12.5},
        }
    )
    with ResultStore(path) as store:
        store.add(first)
        store.add(rerun)
        assert store.list() == [rerun]
        assert store.get("r1").metrics["p_core"] is None
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        assert conn.execute("SELECT name FROM metrics").fetchall() == [("e2e_time",)]
    finally:
        conn.close()


def test_list_filters_and_limit(tmp_path: Path) -> None:
    records = seed001_records() + [llama_finetune("l1", {}, {"loss": 1.64})]
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record in reversed(records):  # insertion order does not matter: started does
            store.add(record)
        assert [r.run_id for r in store.list()] == ["r1", "r2", "r3", "r4", "l1"]
        assert [r.run_id for r in store.list(case="distilbert-pytorch", limit=2)] == ["r3", "r4"]
        assert [r.run_id for r in store.list(case="llama2_7b_finetune-pytorch")] == ["l1"]
        assert [r.run_id for r in store.list(batch_id="batch-1")] == ["r4"]
        assert store.list(limit=0) == []
        assert store.list(case="nope") == []


def test_metric_history(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        for record in seed001_records():
            store.add(record)
        history = store.metric_history("p_core", case="distilbert-pytorch", config="A100x1x8")
        assert [(p.run_id, p.value) for p in history] == [("r1", 1942.6), ("r2", 2181.0)]
        assert store.metric_history("loss") == []
        with pytest.raises(ValueError):
            store.metric_history("bogus")


def test_failed_add_leaves_store_unchanged(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "fleetperf.sqlite") as store:
        record = seed001_records()[0]
        store.add(record)
        broken = record.model_copy(update={"status": "exploded"})  # bypasses validation
        with pytest.raises(sqlite3.IntegrityError):
            store.add(broken)
        assert store.list() == [record]


# --- record -------------------------------------------------------------------------


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
        {"metrics": {"throughput": 1.0}},
        {"columns": ["precision", "speed"]},
        {"columns": ["speed(MMLU)"]},
        {"config": "A100x1x8", "nproc_per_node": 4},
        {"config": "weird", "chip": "", "nnodes": None, "nproc_per_node": None},
        {"fix_hp": {"lr": object()}},
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


def test_config_labels() -> None:
    assert config_label("A100", 1, 8) == "A100单机8卡（1x8）"
    assert config_label("A100", 1, 1) == "A100单机单卡（1x1）"
    assert config_label("BI-V100", 2, 8) == "BI-V100两机8卡（2x8）"
    assert config_label("A100", 4, 8) == "A100四机8卡（4x8）"
    assert config_label("A100", 10, 8) == "A100十机8卡（10x8）"
    assert config_label("A100", 16, 8) == "A10016机8卡（16x8）"


def test_format_fix_hp() -> None:
    short = {"train_batch_size": "bs", "learning_rate": "lr"}
    assert format_fix_hp({}, short) == "/"
    assert format_fix_hp({"train_batch_size": 8, "learning_rate": 1e-05}, short) == "bs=8,lr=1e-05"
    assert format_fix_hp({"warmup_steps": 0, "fused": True}, short) == "warmup_steps=0,fused=true"
    assert format_fix_hp({"precision": "fp16"}, short, exclude=["precision"]) == "/"


# --- renderers ----------------------------------------------------------------------


def test_markdown_reproduces_seed_001() -> None:
    assert to_markdown(seed001_records()) == "\n".join(
        [
            "### distilbert-pytorch",
            "",
            "| 配置 | precision | fix_hp | e2e_time | p_whole | p_train | p_core | acc | mem |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            "| A100单机8卡（1x8） | fp32 | / | 361.0 | 1764.0 | 1861.9 | 1942.6 | 0.915 | 13.9/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100单机8卡（1x8） | fp32 | bs=96 | 334.7 | 2019.1 | 2135.8 | 2181.0 | 0.908 | 33.4/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100单机单卡（1x1） | fp32 | bs=96,lr=0.00015 | 720.8 | 283.7 | 286.1 | 287.9 | 0.912 | 32.7/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100两机8卡（2x8） | fp32 | bs=96 | 58.9 | 3531.1 | 3892.3 | 4058.3 | 0.911 | 32.9/40.0 |",  # noqa: E501 (seed rows verbatim)
            "",
        ]
    )


def test_markdown_llama_finetune_seed_003() -> None:
    records = [
        llama_finetune(
            "l1",
            {},
            {
                "tokens_per_s_per_device": 2788.2,
                "loss": 1.64,
                "acc": 0.38,
                "mem_used_gib": 37.3,
                "mem_total_gib": 40.0,
            },
        ),
        llama_finetune(
            "l2",
            {"precision": "fp16", "local_batchsize": 4},
            {
                "tokens_per_s_per_device": 4017,
                "loss": 1.77,
                "acc": 0.43,
                "mem_used_gib": 32.0,
                "mem_total_gib": 40.0,
                "mfu": 0.361,
            },
        ),
    ]
    lines = to_markdown(records).splitlines()
    assert lines[2] == "| 配置 | fix_hp | tokens/p/s | loss | mem | acc(MMLU) | MFU |"
    # No precision column here, so a precision override shows in fix_hp, as in seed 003.
    assert lines[4] == "| A100单机单卡（1x1） | / | 2788 | 1.64 | 37.3/40.0 | 0.380 | / |"
    assert lines[5] == (
        "| A100单机单卡（1x1） | 数据精度=fp16,local_batchsize=4 | 4017 | 1.77 | 32.0/40.0 | 0.430 "
        "| 36.1% |"
    )


def test_markdown_inference_seed_002() -> None:
    lines = to_markdown([inference("i1")]).splitlines()
    assert lines[0] == "### aquila_33b-inference"
    assert lines[2] == (
        "| 配置 | precision | e2e_time | p_val_whole | p_val_core | p_infer_whole | p_infer_core "
        "| MFU | loss | mem |"
    )
    assert lines[4] == (
        "| A100单机8卡（1x8） | fp16 | 2479.9 | / | / | 8711.0 | 8724.0 | 23.8% | 3.0075 | 12.3/40.0 |"  # noqa: E501
    )


def test_markdown_one_table_per_case() -> None:
    text = to_markdown([seed001_records()[0], inference("i1"), seed001_records()[2]])
    assert text.count("### ") == 2
    distil, infer = text.split("\n### ")
    assert distil.count("| A100") == 2
    assert infer.startswith("aquila_33b-inference")
    assert to_markdown([]) == ""


def test_markdown_marks_failed_runs() -> None:
    ok, bad = seed001_records()[2], seed001_records()[3]
    failed = bad.model_validate(
        {
            **bad.model_dump(),
            "status": "failed",
            "error": "CUDA out of memory | rank 3",
            "metrics": {"e2e_time": 40.2, "mem_used_gib": 39.9, "mem_total_gib": 40.0},
        }
    )
    lines = to_markdown([ok, failed]).splitlines()
    assert lines[2].endswith("| mem | status |")
    assert lines[4].endswith("| 32.7/40.0 | passed |")
    assert lines[5] == (
        "| A100两机8卡（2x8） | fp32 | bs=96 | 40.2 | / | / | / | / | 39.9/40.0 "
        "| failed: CUDA out of memory \\| rank 3 |"
    )
    # All passed: no status column (the seeds have none).
    assert "status" not in to_markdown([ok])


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


def test_csv_parses_back() -> None:
    records = seed001_records() + [inference("i1")]
    rows = list(csv.DictReader(io.StringIO(to_csv(records))))
    assert list(rows[0]) == [
        "run_id",
        "case",
        "vendor",
        "config",
        "status",
        "precision",
        "fix_hp",
        *METRIC_KEYS,
    ]
    assert [row["run_id"] for row in rows] == ["r1", "r2", "r3", "r4", "i1"]
    assert json.loads(rows[2]["fix_hp"]) == {"train_batch_size": 96, "learning_rate": 0.00015}
    assert float(rows[2]["p_core"]) == 287.9
    assert rows[2]["loss"] == ""  # unknown -> empty cell
    assert float(rows[4]["mfu"]) == 0.238


def test_controller_imports_neither_torch_nor_textual() -> None:
    code = (
        "import sys, tui.results\n"
        "bad = [m for m in ('torch', 'textual') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=REPO)
