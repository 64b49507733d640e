"""A passed run judged: each metric against a reference or history band (tui.results.references)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Check(BaseModel):
    """One metric of one run against one band."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    value: float
    low: float | None  # None: open on that side
    high: float | None
    source: Literal["reference", "history"]
    basis: str  # where the band came from, in one line
    flagged: bool


class Verdict(BaseModel):
    """What judging a passed run found: every check, and why some were not made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checks: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def flagged(self) -> list[Check]:
        return [c for c in self.checks if c.flagged]
