"""The result builder: one function turns a run's totals into the ``result`` event payload.

``Run.finish`` (harness.runner) calls it on global rank 0, after reducing the totals, memory
and energy over the ranks (collectives, on every rank) and leaving the process group; a case
passes its ``ModelFlops`` and its own metrics to ``finish``, not here.

Metrics are keyed by registry names (``harness.metrics``); docs/metrics.md says what each
means and docs/harness.md how the pieces fit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.environment import environment
from harness.metrics import METRICS, Metric
from harness.peak import PRECISION_MATH, chip_from_device_name, datasheet_peak
from harness.peakmeter import lookup_or_measure
from harness.perf import (
    PerfTotals,
    main_age_s,
    process_start_time,
    throughput_metrics,
    throughput_notes,
)

if TYPE_CHECKING:
    from harness.device import Device
    from harness.energy import Energy

# Samples per second of training; an inference run keeps tokens_per_s_per_device (real tokens
# of its timed window per second per device) and reports its own p_infer_* / p_val_*.
TRAINING_RATES = ("p_whole", "p_train", "p_core")


@dataclass(frozen=True)
class ModelFlops:
    """Model FLOPs of one sample: ``per_token`` x the tokens the device computed on (padded)
    plus ``per_sequence`` for parts that run once per sequence (a classifier head)."""

    per_token: float
    per_sequence: float = 0.0
    formula: str = ""  # how they were counted, for the notes

    def of(self, tokens: float, sequences: float) -> float:
        return self.per_token * tokens + self.per_sequence * sequences


def build_result(
    *,
    totals: PerfTotals,
    world_size: int,
    device: Device,
    chip: str | None,
    flops: ModelFlops,
    memory: tuple[float | None, float | None],
    converged: bool,
    peak_cache: Path,
    passed: bool | None = None,
    metrics: Mapping[str, float | None] | None = None,
    message: str | None = None,
    notes: Iterable[str] = (),
    training: bool = True,
    registry: Mapping[str, Metric] = METRICS,
    energy: Energy | None = None,
    model: bool = True,
) -> dict[str, Any]:
    """The ``result`` payload (status, converged, message, metrics, notes, world_size,
    environment, peak) from totals reduced over ranks (``reduce_totals``).

    ``metrics`` holds the case's own figures (acc, loss, p_infer_*, ...) by registry name;
    ``training=False`` leaves the training sample rates out (inference cases report their
    own); tokens_per_s_per_device is then the real tokens of the timed (inference) window per
    second per device. ``model=False`` (``kind: base``, a benchmark of the device itself):
    no model ran, so no sample or token rates, no MFU, no energy per sample, no peak (null)
    and no notes about them: the clocks, the memory and the case's own metrics.
    ``energy`` (``EnergyMeter.total``, over the same counted window) gives the energy per
    sample and per token, null with a note where it is not known.
    A model's run measures the device's peak first if ``peak_cache`` has no entry for it
    (about 1.5 s on a CPU), after the run's clocks are read. ``passed`` (default:
    ``converged``) lets a run that ran its whole schedule short of the target pass (a seed
    row FlagPerf published so).
    """
    e2e_time = time.time() - process_start_time()
    e2e_time_main = main_age_s()
    out: dict[str, float | None] = {"e2e_time": e2e_time, "e2e_time_main": e2e_time_main}
    rates = throughput_metrics(totals, world_size) if model else {}
    if not training:
        rates = {k: v for k, v in rates.items() if k not in TRAINING_RATES}
    out.update(rates)
    out.update(metrics or {})
    unknown = sorted(set(out) - set(registry))
    if unknown:
        raise ValueError(f"metrics not in the registry: {', '.join(unknown)}")

    all_notes = _device_notes(device)
    peak: dict[str, Any] | None = None
    if model:
        math = device.math_mode()
        per_device = _model_flops_per_s_per_device(flops, totals, world_size)
        datasheet, datasheet_note = datasheet_peak(chip, device.name, math)
        measured = lookup_or_measure(device, math, peak_cache)
        out["mfu"] = per_device / datasheet if per_device and datasheet else None
        out["mfu_measured"] = per_device / measured["matmul_flops"] if per_device else None
        all_notes[:0] = _notes(totals, flops, device, math, datasheet_note, measured, training)
        if energy is not None:
            out.update(_energy_metrics(energy, totals))
            all_notes.append(_energy_note(energy))
        peak = {
            "chip": chip_from_device_name(device.name),
            "math": math,
            "datasheet_flops": datasheet,
            "measured_flops": measured["matmul_flops"],
            "measured_mem_bw_bytes_per_s": measured["mem_bw_bytes_per_s"],
            "model_flops_per_s_per_device": per_device,
        }
    out["mem_used_gib"], out["mem_total_gib"] = memory
    all_notes += list(notes)
    return {
        "status": "passed" if (converged if passed is None else passed) else "failed",
        "converged": converged,
        "message": message,
        "metrics": out,
        "notes": all_notes,
        "world_size": world_size,
        "environment": environment(device),
        "peak": peak,
    }


def _energy_metrics(energy: Energy, totals: PerfTotals) -> dict[str, float | None]:
    def per(count: float) -> float | None:
        return energy.joules / count if energy.joules is not None and count > 0 else None

    return {"energy_j_per_sample": per(totals.samples), "energy_j_per_token": per(totals.tokens)}


def _energy_note(energy: Energy) -> str:
    if energy.joules is None:
        return f"energy null: {energy.source}"
    return (
        f"energy: {energy.joules:.4g} J over the counted window without evaluation, every "
        f"device: {energy.source}"
    )


def _model_flops_per_s_per_device(
    flops: ModelFlops, totals: PerfTotals, world_size: int
) -> float | None:
    """Model FLOPs of the counted steps / training time without evaluation / devices."""
    if totals.train_time <= 0:
        return None
    work = flops.of(totals.padded_tokens, totals.samples)
    return work / totals.train_time / max(1, world_size) or None


def _notes(
    totals: PerfTotals,
    flops: ModelFlops,
    device: Device,
    math: str,
    datasheet_note: str | None,
    measured: Mapping[str, Any],
    training: bool = True,
) -> list[str]:
    notes = throughput_notes(totals)
    notes.append(
        "p_* count real samples; tokens_per_s_per_device counts real (non-pad) tokens"
        if training
        else "tokens_per_s_per_device: real (non-pad) tokens of the timed inference window "
        "/ its wall time / devices"
    )
    per_seq = f" + {flops.per_sequence:.4g} per sequence" if flops.per_sequence else ""
    notes.append(
        f"mfu: model FLOPs ({flops.per_token:.4g} per padded token{per_seq}"
        + (f"; {flops.formula}" if flops.formula else "")
        + ") per second per device / peak, over "
        + (
            "training time without evaluation"
            if training
            else "the timed inference window's wall time (warm-up forwards left out)"
        )
    )
    if math != PRECISION_MATH.get(device.precision):
        notes.append(
            f"mfu: precision {device.precision} ran its matmuls at {math}: "
            f"divided by the {math} peak"
        )
    if datasheet_note:
        notes.append(datasheet_note)
    notes.append(
        f"mfu_measured: divided by {measured['matmul_flops'] / 1e12:.4g} TFLOP/s, the "
        f"{math} matmul rate measured on {measured['host']} / {measured['device']} "
        f"(n={measured['matmul_n']})"
    )
    if measured.get("cached") is False:
        notes.append(
            f"mfu_measured: the peak was measured while the host was busy (load "
            f"{measured['load_per_cpu']:.1f} per CPU) and is not cached; a quiet host gives "
            "a higher peak and a lower mfu_measured"
        )
    return notes


def _device_notes(device: Device) -> list[str]:
    """What any run's memory and device figures mean, model or not."""
    cpu = ["mem on CPU: peak memory of the process and its data-loader workers / host"]
    return [*(cpu if device.type == "cpu" else []), *device.notes]
