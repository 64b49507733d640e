"""The metric registry: every metric fleetperf reports, defined once.

Name, unit, direction, how it is shown, and what it means in one line. The harness writes
results under these names; the controller's record, tables and terminal app read them from
here (``harness.metrics``), and ``docs/metrics.md`` shows this table. A case may add metrics
of its own in ``case.yaml`` (``metrics:``), with the same fields.

Standard library only: the controller imports this module and never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["training", "inference", "both"]


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # "s", "samples/s", "tokens/s", "GiB", "fraction", "" (a plain number)
    higher_is_better: bool | None  # None: neither (a count, a total)
    fmt: str  # a format spec for tables and the app: ".1f", ".3f", "pct" (fraction as %)
    meaning: str

    def show(self, value: float | None) -> str:
        """The value as tables show it; "/" where it is unknown (as in the seeds)."""
        if value is None:
            return "/"
        if self.fmt == "pct":
            return f"{value * 100:.1f}%"
        return format(value, self.fmt)


def _m(name: str, unit: str, higher: bool | None, fmt: str, meaning: str) -> Metric:
    return Metric(name, unit, higher, fmt, meaning)


STANDARD: tuple[Metric, ...] = (
    _m(
        "e2e_time",
        "s",
        False,
        ".1f",
        "seconds from workload process start to its result on global rank 0, init included",
    ),
    _m(
        "e2e_time_main",
        "s",
        False,
        ".1f",
        "seconds from the workload's main() to its result (FlagPerf's clock)",
    ),
    _m(
        "p_whole",
        "samples/s",
        True,
        ".1f",
        "training samples after warm-up / their wall time, evaluation included",
    ),
    _m(
        "p_train",
        "samples/s",
        True,
        ".1f",
        "the same samples / the same wall time without evaluation (per rank, then slowest)",
    ),
    _m(
        "p_core",
        "samples/s",
        True,
        ".1f",
        "the same samples / their compute time (forward, backward, optimizer; synchronised)",
    ),
    _m(
        "tokens_per_s_per_device",
        "tokens/s",
        True,
        ".1f",
        "real (non-pad) tokens of those samples / training time without evaluation / devices",
    ),
    _m(
        "mfu",
        "fraction",
        True,
        "pct",
        "model FLOP/s per device / the chip's datasheet dense peak at the math mode that ran",
    ),
    _m(
        "mfu_measured",
        "fraction",
        True,
        "pct",
        "model FLOP/s per device / the dense matmul rate measured on this host and device",
    ),
    _m(
        "energy_j_per_sample",
        "J/sample",
        False,
        ".4g",
        "energy of the counted samples (NVML GPU boards or RAPL CPU packages, every device, "
        "evaluation left out) / those samples; null where no counter (harness.energy)",
    ),
    _m(
        "energy_j_per_token",
        "J/token",
        False,
        ".4g",
        "the same energy / those samples' real (non-pad) tokens",
    ),
    _m("acc", "fraction", True, ".3f", "the case's evaluation accuracy"),
    _m("loss", "", False, ".4f", "mean training loss of the last logging window"),
    _m(
        "mem_used_gib",
        "GiB",
        False,
        ".1f",
        "peak device memory used as the device's management tool reports it (the whole "
        "device, as FlagPerf's monitors read it; highest device; on CPU: the workload and "
        "its data-loader workers)",
    ),
    _m(
        "mem_allocator_gib",
        "GiB",
        False,
        ".1f",
        "peak memory torch's allocator reserved (highest device; null on CPU): no context, "
        "no other process",
    ),
    _m("mem_total_gib", "GiB", None, ".1f", "device memory total (host memory on CPU)"),
    _m(
        "warmup_samples",
        "samples",
        None,
        ".0f",
        "training samples of the warm-up steps, left out of every rate",
    ),
    _m("p_val_whole", "tokens/s", True, ".1f", "evaluation tokens / evaluation wall time"),
    _m("p_val_core", "tokens/s", True, ".1f", "evaluation tokens / forward compute time"),
    _m(
        "p_infer_whole",
        "tokens/s",
        True,
        ".1f",
        "inference positions computed (padding included, as FlagPerf's inference counts "
        "tokens) / inference wall time",
    ),
    _m(
        "p_infer_core",
        "tokens/s",
        True,
        ".1f",
        "inference positions computed (padding included) / forward compute time",
    ),
    _m(
        "p_infer_real_whole",
        "tokens/s",
        True,
        ".1f",
        "real (non-pad) inference tokens / inference wall time",
    ),
    _m(
        "p_infer_real_core",
        "tokens/s",
        True,
        ".1f",
        "real (non-pad) inference tokens / forward compute time",
    ),
)

METRICS: dict[str, Metric] = {m.name: m for m in STANDARD}


def registry(extra: Iterable[Metric] = ()) -> dict[str, Metric]:
    """The standard metrics plus a case's own; a case may not redefine a standard one."""
    out = dict(METRICS)
    for metric in extra:
        if metric.name in METRICS:
            raise ValueError(f"metric {metric.name!r} is standard: a case may not redefine it")
        out[metric.name] = metric
    return out


def markdown_table(metrics: Iterable[Metric] = STANDARD) -> str:
    """The registry as the Markdown table docs/metrics.md shows (a test keeps them equal)."""
    rows = ["| name | unit | better | shown as | meaning |", "| --- | --- | --- | --- | --- |"]
    for m in metrics:
        better = {True: "higher", False: "lower", None: "—"}[m.higher_is_better]
        rows.append(f"| `{m.name}` | {m.unit or '—'} | {better} | `{m.fmt}` | {m.meaning} |")
    return "\n".join(rows) + "\n"
