"""The metrics a case may report and the columns its report names: the registry
(``harness.metrics``) plus what a case declares in case.yaml (``metrics:``)."""

from __future__ import annotations

import re

from harness.case import metric_problem
from harness.metrics import Metric, registry
from pydantic import BaseModel, ConfigDict, model_validator

# Report columns that are not metrics: the tables build them from other fields.
TABLE_ONLY_COLUMNS = ("precision", "fix_hp", "mem")
# Seed 003 writes "token/p/s", seed 004 and DESIGN's metric table "tokens/p/s": both name
# the same metric; "MFU" is the seeds' header for mfu.
COLUMN_ALIASES = {
    "token/p/s": "tokens_per_s_per_device",
    "tokens/p/s": "tokens_per_s_per_device",
    "MFU": "mfu",
}
# "acc(MMLU)" (seed 003): a known column with a qualifier, shown verbatim as the header.
QUALIFIED = re.compile(r"^(?P<key>[^()]+)\((?P<qualifier>[^()]+)\)$")


class CaseMetric(BaseModel):
    """A case's own metric as a record carries it: the registry's fields, checked by the
    rule case.yaml's ``metrics:`` follow (harness.case.metric_problem). Built from a
    harness Metric by its attributes."""

    model_config = ConfigDict(extra="forbid", frozen=True, from_attributes=True)

    name: str
    unit: str
    higher_is_better: bool | None
    fmt: str = ".1f"
    meaning: str

    @model_validator(mode="after")
    def _valid(self) -> CaseMetric:
        problem = metric_problem(self.metric())
        if problem:
            raise ValueError(problem)
        return self

    def metric(self) -> Metric:
        return Metric(self.name, self.unit, self.higher_is_better, self.fmt, self.meaning)


def metric_registry(case_metrics: list[CaseMetric]) -> dict[str, Metric]:
    """The standard metrics and a case's own; ValueError if the case redefines a standard one."""
    return registry(m.metric() for m in case_metrics)


def column_name(spec: str) -> str:
    """The key a report column names, known or not: its qualifier dropped, an alias resolved."""
    match = QUALIFIED.match(spec)
    key = match.group("key") if match else spec
    return COLUMN_ALIASES.get(key, key)


def column_key(spec: str, metrics: dict[str, Metric]) -> str:
    """The metric/table key a report column names; ValueError for an unknown one."""
    key = column_name(spec)
    if key not in metrics and key not in TABLE_ONLY_COLUMNS:
        known = ", ".join((*TABLE_ONLY_COLUMNS, *metrics, *COLUMN_ALIASES))
        raise ValueError(f"unknown report column {spec!r} (known: {known})")
    return key
