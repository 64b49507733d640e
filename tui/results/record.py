"""The run record: what one case run was, how it ended and what it measured.

Its fields are defined once, here; ``docs/record.md`` describes them. The JSON form
(``result.json``, ``fleetperf results --format json``) is every field except the few the
store and the tables keep for themselves (``INTERNAL``). Metric names and units come from
the registry (``harness.metrics``) plus the metrics a case declares in its case.yaml.
Controller code: no torch, no textual.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from harness.case import MODEL_METRICS
from harness.metrics import METRICS, Metric
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tui.catalog.metrics import (
    QUALIFIED,
    TABLE_ONLY_COLUMNS,
    CaseMetric,
    column_name,
    metric_registry,
)
from tui.core import safefile
from tui.core.events import RunStatus
from tui.core.text import clean_tree
from tui.results.verdict import Verdict

LOADED = 0.5  # load per CPU from which a run's host counts as busy with other work
# The statuses a record holds (a queued or refused run has none).
STATUSES: tuple[RunStatus, ...] = ("passed", "failed", "aborted", "running", "interrupted")

# Every record carries all standard metrics (null where not applicable): one JSON/CSV shape.
METRIC_KEYS = tuple(METRICS)
INFER_METRICS = ("p_val_whole", "p_val_core", "p_infer_whole", "p_infer_core")

# the catalog's CONFIG_NAME
_CONFIG = re.compile(r"^(?P<chip>.+)x(?P<nnodes>\d+)x(?P<nproc>\d+)(?:-[a-z0-9]+)?$")
# A run id names its directory (<results>/runs/<run_id>): one plain path component, as
# new_run_id makes them (tui/executors/base.py):
# 20261121-193000-distilbert-pytorch-3fa2c01d9e4b7a65.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}")
# A metric's name as a case.yaml may write one (harness.case.METRIC_NAME), bounded: the
# name a newer fleetperf's record may carry that this one does not know.
_METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def is_run_id(text: object) -> bool:
    """Whether ``text`` is a run id: the one check wherever a run id comes in (the record,
    an import, prune, cleanup, attach), since it names a directory under results/runs."""
    return isinstance(text, str) and RUN_ID.fullmatch(text) is not None


def unknown_metric(name: str) -> Metric:
    """A metric a newer fleetperf wrote that this one does not know: kept and shown as a
    plain number (docs/store.md, "Versions on one store")."""
    return Metric(name, "", None, "g", "not known to this fleetperf version")


# Seed 000/001 (training) and seed 002 (inference) layouts: used when a record names none
# (a base case's record without columns shows precision, fix_hp and its own metrics).
TRAIN_COLUMNS = ("precision", "fix_hp", "e2e_time", "p_whole", "p_train", "p_core", "acc", "mem")
INFER_COLUMNS = (
    "precision",
    "e2e_time",
    "p_val_whole",
    "p_val_core",
    "p_infer_whole",
    "p_infer_core",
    "mfu",
    "loss",
    "mem",
)


def now_utc_iso() -> str:
    """The current time in the records' timestamp form, e.g. 2026-11-21T19:30:00Z."""
    return utc_iso(datetime.now(UTC))


def utc_iso(value: str | datetime) -> str:
    """Normalise to UTC at whole seconds with a Z suffix: one fixed-width form sorts right."""
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {value!s} has no UTC offset (write it as ...Z)")
    return dt.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


class Peak(BaseModel):
    """What MFU divides, as the workload's result reported it (``harness.build_result``):
    ``mfu`` = model FLOP/s per device / ``datasheet_flops``, ``mfu_measured`` = the same /
    ``measured_flops``. Kept so that a figure can be audited and recomputed later."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    chip: str | None = None  # the datasheet table's chip the device's name matched
    math: str  # the math the matmuls ran at: fp32, tf32, fp16, bf16
    datasheet_flops: float | None = Field(default=None, ge=0)
    measured_flops: float | None = Field(default=None, ge=0)
    measured_mem_bw_bytes_per_s: float | None = Field(default=None, ge=0)
    model_flops_per_s_per_device: float | None = Field(default=None, ge=0)


class RunRecord(BaseModel):
    """One case run. Field order is the JSON record's order."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1)
    case: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    config: str = Field(min_length=1)
    hosts: list[str] = Field(default_factory=list)
    status: RunStatus
    error: str | None = None
    started: str
    finished: str | None = None  # None while running
    precision: str | None = None
    fix_hp: dict[str, Any] = Field(default_factory=dict)
    hp: dict[str, Any] = Field(default_factory=dict)  # every resolved hyperparameter
    # The environment variables the vendor config asked for, as written ("{data_dir}" is
    # each host's data directory); the inventory's fleetperf_workload_env is not kept.
    config_env: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    # The workload's own words, e.g. why p_core < p_train.
    notes: list[str] = Field(default_factory=list)
    # What the workload saw (hostname, CPU, accelerator, versions; the harness writes it).
    environment: dict[str, Any] = Field(default_factory=dict)
    # What MFU divides (chip, math, datasheet and measured peaks, model FLOP/s per device);
    # None where the run ended without a result or its workload reported none.
    peak: Peak | None = None
    # The energy and monitoring tables: the run's `sys` samples summarised per host and
    # device (tui/results/monitoring.py); None where the run sent none.
    monitoring: dict[str, Any] | None = None
    # base-interconnect all_reduce: each rank's own seconds per iteration (rank, node, host,
    # s), as the workload gave them, for fleetperf qualify's stragglers; None: none given.
    rank_times: list[dict[str, Any]] | None = None
    # A sweep's points (llm-serving's loads): each {"hp": {the swept key: value}, "metrics":
    # {...}}, as the workload gave them; the top-level metrics are one of them (a note says
    # which). None: not a sweep.
    points: list[dict[str, Any]] | None = None
    # What the controller knows: how and where the workload ran.
    executor: str | None = None
    image: str | None = None
    # What the run's kind of host records of it, in its own terms (tui/executors/kinds.py):
    # a Slurm job's job_id, partition, nodes and state. Before schema 14: ``slurm``.
    executor_detail: dict[str, Any] | None = None
    # The hosts' 1-minute load average per CPU in their preflight, just before the launch
    # (the highest of them); tables flag a loaded host.
    load_per_cpu: float | None = None
    # Whether the data and checkpoint were `fleetperf prepare --synthetic`'s (on any host);
    # None where the data was staged without fleetperf prepare. Tables flag synthetic runs.
    synthetic_data: bool | None = None
    # --smoke: the case's short run (case.yaml smoke:), passed on a finite loss; no target,
    # never judged nor in another run's history (docs/record.md). Tables mark it.
    smoke: bool = False
    case_metrics: list[CaseMetric] = Field(default_factory=list)
    # A passed run against its references and history (docs/references.md); None: not
    # judged (not passed, or --no-judge).
    verdict: Verdict | None = None

    # INTERNAL: for the store, the tables and cleanup; not part of the JSON record.
    batch_id: str | None = None
    chip: str = ""
    nnodes: int | None = Field(default=None, ge=1)
    nproc_per_node: int | None = Field(default=None, ge=1)
    columns: list[str] = Field(default_factory=list)
    short_names: dict[str, str] = Field(default_factory=dict)
    run_dir: str | None = None
    inventory: str | None = None
    controller: str | None = None  # the lease of the controller that ran it (tui/core/liveness.py)
    cleaned: bool = False  # an interrupted run whose remote work `fleetperf cleanup` stopped

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str) -> str:
        if not is_run_id(value):
            raise ValueError("not a run id (letters, digits, . _ -, at most 200)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        # A record written before schema 14 (an export, a result.json) names its kind's
        # detail ``slurm``.
        if isinstance(data, dict) and "slurm" in data and "executor_detail" not in data:
            data = {**data, "executor_detail": data["slurm"]}
            del data["slurm"]
        return data

    @field_validator("started", "finished", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> Any:
        return utc_iso(value) if isinstance(value, str | datetime) else value

    @field_validator("status")
    @classmethod
    def _recorded(cls, value: RunStatus) -> RunStatus:
        if value not in STATUSES:
            raise ValueError(f"a record's status is one of {', '.join(STATUSES)}")
        return value

    @field_validator(
        "hosts",
        "error",
        "notes",
        "environment",
        "image",
        "executor_detail",
        "rank_times",
        "points",
        mode="before",
    )
    @classmethod
    def _host_text(cls, value: Any) -> Any:
        # What hosts and workloads said reaches a record by paths of its own (a Slurm job's
        # nodes, an image id): cleaned here too (tui/core/text.py), or result.json and the store
        # could not encode it.
        return clean_tree(value)

    @field_validator("error")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        # One line; joining keeps every part of a multi-line message.
        if value is None:
            return None
        lines = [line.strip() for line in value.splitlines() if line.strip()]
        return "; ".join(lines) or None

    @field_validator("fix_hp", "hp", "environment")
    @classmethod
    def _json_values(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"must hold plain JSON values: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _derive(self) -> Self:
        self._fill_from_config()
        # A metric this version does not know (a newer one wrote it, or names it as a
        # column) is kept, after the known ones; only a name no version could write is
        # refused. (A case's columns are checked where the catalog reads its case.yaml.)
        metrics = metric_registry(self.case_metrics)
        keys = [column_name(spec) for spec in self.columns]
        for name in sorted({*self.metrics, *keys}.difference(metrics, TABLE_ONLY_COLUMNS)):
            if not _METRIC_NAME.fullmatch(name):
                raise ValueError(f"metric name {name[:80]!r}: lower case, digits and _")
            metrics[name] = unknown_metric(name)
        # JSON has no NaN/inf: a diverged value is stored as unknown; status/error say why.
        self.metrics = {
            key: v if v is not None and math.isfinite(v) else None
            for key in metrics
            for v in [self.metrics.get(key)]
        }
        # Plain aliases collapse to the key so records of one case merge into one column;
        # a qualified column ("acc(MMLU)") stays as written.
        self.columns = [
            spec if QUALIFIED.match(spec) else key
            for spec, key in zip(self.columns, keys, strict=True)
        ]
        if not self.columns:
            self.columns = self._default_columns()
        return self

    def _default_columns(self) -> list[str]:
        """The layout of a record that names none, by what it measured: an inference run's
        p_infer_* / p_val_*, a base case's own metrics alone (kind: base, no model figure at
        all), else a training run's."""
        if any(self.metrics[key] is not None for key in INFER_METRICS):
            return list(INFER_COLUMNS)
        own = [m.name for m in self.case_metrics]
        base = not any(self.metrics[key] is not None for key in MODEL_METRICS)
        if base and any(self.metrics[key] is not None for key in own):
            return ["precision", "fix_hp", *own]
        return list(TRAIN_COLUMNS)

    @property
    def loaded(self) -> bool:
        """Its hosts were busy with other work at the launch: its numbers measure that too."""
        return self.load_per_cpu is not None and self.load_per_cpu >= LOADED

    def registry(self) -> dict[str, Metric]:
        """The metrics this record holds: the standard ones, its case's own, then any this
        version does not know."""
        metrics = metric_registry(self.case_metrics)
        for name in self.metrics:
            if name not in metrics:
                metrics[name] = unknown_metric(name)
        return metrics

    def _fill_from_config(self) -> None:
        """chip/nnodes/nproc_per_node default from config "CHIPxNNODESxNPROC"; must agree."""
        match = _CONFIG.match(self.config)
        if match is None:
            if not self.chip or self.nnodes is None or self.nproc_per_node is None:
                raise ValueError(
                    f"config {self.config!r} is not CHIPxNNODESxNPROC: "
                    "give chip, nnodes and nproc_per_node"
                )
            return
        parsed = (match["chip"], int(match["nnodes"]), int(match["nproc"]))
        given = (self.chip or parsed[0], self.nnodes or parsed[1], self.nproc_per_node or parsed[2])
        if given != parsed:
            raise ValueError(f"config {self.config!r} disagrees with chip/nnodes/nproc {given}")
        self.chip, self.nnodes, self.nproc_per_node = parsed

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON record: exactly RECORD_KEYS, in that order."""
        return self.model_dump(mode="json", include=set(RECORD_KEYS))


INTERNAL = (
    "batch_id",
    "chip",
    "nnodes",
    "nproc_per_node",
    "columns",
    "short_names",
    "run_dir",
    "inventory",
    "controller",
    "cleaned",
)
RECORD_KEYS = tuple(name for name in RunRecord.model_fields if name not in INTERNAL)


def write_result_json(record: RunRecord, run_dir: Path) -> Path:
    """``run_dir/result.json``: the JSON record, written to a temporary file and renamed
    over it, so a reader sees no file or a whole one, never a part (nor an old one cut)."""
    path = run_dir / "result.json"
    text = json.dumps(record.to_json_dict(), indent=2, ensure_ascii=False) + "\n"
    safefile.write_text(path, text)
    return path
