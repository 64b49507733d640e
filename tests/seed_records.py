"""Run records of the seeds' published rows (FlagPerf case pages), for store/table tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tui.results.record import INFER_COLUMNS, RunRecord
from tui.results.store import ResultStore

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
# A result's peak object (the contract's, which MFU divides): an A100 at tf32.
PEAK = {
    "chip": "A100",
    "math": "tf32",
    "datasheet_flops": 156e12,
    "measured_flops": 120e12,
    "measured_mem_bw_bytes_per_s": 1.5e12,
    "model_flops_per_s_per_device": 41.8e12,
}


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
        columns=list(INFER_COLUMNS),  # seed 002's layout
    )


def store_at_version(
    tmp_path: Path, column: str, version: int
) -> tuple[Path, RunRecord, RunRecord]:
    """A store as an older fleetperf left it, at schema ``version`` before ``column`` was
    added (the next open migrates it), holding seed row r1: its path, r1, and r2 to add."""
    path = tmp_path / "fleetperf.sqlite"
    first, second = seed001_records()[:2]
    with ResultStore(path) as store:
        store.add(first)
    conn = sqlite3.connect(path)
    conn.executescript(  # nor what Alembic's v11 (qualifications), v12 and v13 added, v14 renamed
        "ALTER TABLE runs RENAME COLUMN executor_detail TO slurm;"
        f" ALTER TABLE runs DROP COLUMN {column}; DROP TABLE qualifications;"
        " ALTER TABLE runs DROP COLUMN rank_times; ALTER TABLE runs DROP COLUMN points;"
        f" PRAGMA user_version = {version};"
    )
    conn.close()
    return path, first, second


def running_record(run_id: str, controller: str, run_dir: Path, **fields: Any) -> RunRecord:
    """An emitter run another controller has as running in the store (tests of attach)."""
    return RunRecord(
        run_id=run_id,
        case="emitter",
        vendor="cpu",
        config="CPUx1x1",
        chip="CPU",
        nnodes=1,
        nproc_per_node=1,
        hosts=["node-a"],
        status="running",
        started="2026-11-26T12:00:00Z",
        precision="fp32",
        run_dir=str(run_dir),
        controller=controller,
        **fields,
    )
