"""The published figures a vendor config declares (``references:``, docs/references.md):
parsed and checked against the case's metrics. Judging a run by them is tui.results."""

from __future__ import annotations

import math
from typing import Any

from harness.metrics import Metric
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_REFERENCE_TOLERANCE = 0.10  # a reference's side that matters, when not given


class Reference(BaseModel):
    """One published figure in a vendor config (``references:``): ReFrame's (value,
    lower, upper, unit) with fractions of the value; a bound given as null is open."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    value: float
    lower: float | None = Field(default=None, le=0)
    upper: float | None = Field(default=None, ge=0)
    unit: str
    # Where the figure comes from (seed, row, what the row says); shown with it.
    source: str = Field(min_length=1)
    # The accelerator the figure was measured on: a part of the name the workload reports
    # (environment.accelerator, e.g. "A100-SXM4-40GB"); default the config's chip.
    device: str | None = Field(default=None, min_length=1)
    # Hyperparameters that differ from the config's for this figure (a seed's second row).
    hp: dict[str, Any] = Field(default_factory=dict)

    @field_validator("value")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    def bounds(self, metric: Metric) -> tuple[float | None, float | None]:
        """The band's low and high ends. A bound not written defaults by the metric's
        direction: 10 % on the side that matters, open on the other (both for a metric
        with no direction)."""
        lower, upper = self.lower, self.upper
        if "lower" not in self.model_fields_set and metric.higher_is_better is not False:
            lower = -DEFAULT_REFERENCE_TOLERANCE
        if "upper" not in self.model_fields_set and metric.higher_is_better is not True:
            upper = DEFAULT_REFERENCE_TOLERANCE
        scale = abs(self.value)
        return (
            None if lower is None else self.value + lower * scale,
            None if upper is None else self.value + upper * scale,
        )


def parse_references(raw: Any, metrics: dict[str, Metric]) -> list[Reference]:
    """A config's ``references`` list, validated; ValueError naming the entry and field."""
    if not isinstance(raw, list):
        raise ValueError("references: expected a list")
    refs = []
    for i, item in enumerate(raw):
        where = f"references.{i}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected a mapping")
        try:
            ref = Reference(**item)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"{where}.{field}: {err['msg']}") from None
        metric = metrics.get(ref.metric)
        if metric is None:
            raise ValueError(f"{where}.metric: unknown metric {ref.metric!r}")
        if ref.unit != metric.unit:
            raise ValueError(
                f"{where}.unit: {ref.unit!r} is not {ref.metric}'s unit ({metric.unit!r})"
            )
        refs.append(ref)
    return refs
