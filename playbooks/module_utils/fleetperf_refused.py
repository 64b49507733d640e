"""Refused: a run step's one-line failure naming the host (fleetperf_preflight_step,
fleetperf_poll_step); the module wrapping the step fails with its text and fields."""

from __future__ import annotations


class Refused(Exception):
    """A step's one-line failure naming the host, with the result fields that go with it."""

    def __init__(self, msg: str, **fields: object) -> None:
        super().__init__(msg)
        self.fields = fields
