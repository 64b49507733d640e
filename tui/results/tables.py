"""Result tables: markdown as the seeds' "性能指标" tables (FlagPerf case pages), CSV one
flat row per run for spreadsheets, JSON the records themselves. Pure functions.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

from harness.metrics import Metric

from tui.catalog.metrics import QUALIFIED, column_key
from tui.results import monitoring_tables as mon
from tui.results.record import METRIC_KEYS, RunRecord

FORMATS = ("md", "csv", "json")

TOKENS_HEADER = "tokens/p/s"  # DESIGN's spelling (seed 003 writes "token/p/s")
_HEADERS = {"tokens_per_s_per_device": TOKENS_HEADER, "mfu": "MFU"}


def to_json(records: Iterable[RunRecord]) -> str:
    """A JSON list of run records."""
    return json.dumps([r.to_json_dict() for r in records], indent=2, ensure_ascii=False)


def _unit_header(metric: Metric) -> str:
    return f"{metric.name} ({metric.unit})" if metric.unit else metric.name


def to_csv(records: Iterable[RunRecord]) -> str:
    """One row per run; fix_hp as a JSON object, metrics at full precision, empty if unknown.
    Metric headers carry their unit: ``p_core (samples/s)``."""
    records = list(records)
    metrics: dict[str, Metric] = {}
    for r in records:
        metrics.update(r.registry())
    names = list(METRIC_KEYS) + [k for k in metrics if k not in METRIC_KEYS]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "run_id",
            "case",
            "vendor",
            "config",
            "status",
            "smoke",
            "started",
            "precision",
            "fix_hp",
            *(_unit_header(metrics[k]) for k in names),
        ]
    )
    for r in records:
        writer.writerow(
            [
                r.run_id,
                r.case,
                r.vendor,
                r.config,
                r.status,
                "true" if r.smoke else "false",
                r.started,
                r.precision or "",
                json.dumps(r.fix_hp, ensure_ascii=False),
                *("" if r.metrics.get(k) is None else repr(r.metrics[k]) for k in names),
            ]
        )
    return out.getvalue().removesuffix("\n")


def to_markdown(records: Iterable[RunRecord], ids: bool = False) -> str:
    """One seed-style table per case under a ``### <case>`` heading, rows in input order,
    a units legend under each. ``ids``: a first column with the short run id and date."""
    by_case: dict[str, list[RunRecord]] = {}
    for record in records:
        by_case.setdefault(record.case, []).append(record)
    return "\n".join(_case_table(case, runs, ids) for case, runs in by_case.items())


# Node counts as the seeds write them ("单机", "两机"); past ten, plain digits ("16机").
_CN_NUMERALS = dict(enumerate("单两三四五六七八九十", start=1))


def config_label(chip: str, nnodes: int, nproc_per_node: int) -> str:
    """The seeds' row label: A100单机单卡（1x1）, A100单机8卡（1x8）, A100两机8卡（2x8）."""
    nodes = _CN_NUMERALS.get(nnodes, str(nnodes))
    devices = "单卡" if nproc_per_node == 1 else f"{nproc_per_node}卡"
    return f"{chip}{nodes}机{devices}（{nnodes}x{nproc_per_node}）"


def short_id(run_id: str) -> str:
    """The first six digits of the run id's random tail (``...-emitter-3fa2c01d9e4b7a65``
    -> ``3fa2c0``; older ids' four whole): typed back, unique enough among a table's runs."""
    return run_id.rsplit("-", 1)[-1][:6]


def format_fix_hp(
    fix_hp: dict[str, Any], short_names: dict[str, str], exclude: Sequence[str] = ()
) -> str:
    """'bs=96,lr=0.00015' (seed 001 style), '/' when nothing was overridden."""
    parts = [
        f"{short_names.get(key, key)}={_hp_value(value)}"
        for key, value in fix_hp.items()
        if key not in exclude
    ]
    return ",".join(parts) or "/"


def _hp_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)  # floats keep Python's shortest form: 0.00015, 1e-05 (seed 000)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _case_table(case: str, runs: list[RunRecord], ids: bool) -> str:
    header, rows, legend = case_table(runs, ids)
    lines = [f"### {case}", "", _md_row(header), _md_row(["---"] * len(header))]
    lines += [_md_row(cells) for cells in rows]
    return "\n".join(lines) + "\n" + (f"\n{legend}\n" if legend else "")


def case_table(runs: list[RunRecord], ids: bool) -> tuple[list[str], list[list[str]], str]:
    """One case's seed-style table as cells: header, rows and the units legend (markdown
    here, HTML in the report)."""
    columns = _merged_columns(runs)
    metrics: dict[str, Metric] = {}
    for run in runs:
        metrics.update(run.registry())
    # A failed/aborted run keeps its partial numbers, so the table must say it did not pass;
    # a run on a busy host, on synthetic data or a smoke run is not silently mixed in.
    show_status = any(
        r.status != "passed" or r.loaded or r.synthetic_data or r.smoke or capped(r) for r in runs
    )
    header = [
        *(["run", "date"] if ids else []),
        "配置",
        *(_header(spec) for spec in columns),
        *(["status"] if show_status else []),
    ]
    rows = []
    keys = {column_key(spec, metrics) for spec in columns}
    for run in runs:
        cells = [short_id(run.run_id), run.started[:10]] if ids else []
        cells.append(config_label(run.chip, run.nnodes or 1, run.nproc_per_node or 1))
        cells += [_cell(run, column_key(spec, metrics), keys, metrics) for spec in columns]
        if show_status:
            cells.append(_status_cell(run))
        rows.append(cells)
    return header, rows, _legend(keys, metrics)


def _legend(keys: set[str], metrics: dict[str, Metric]) -> str:
    """Units of the table's metric columns in registry order, as the seeds' legend has."""
    parts = [
        f"{_HEADERS.get(name, name)}: {_unit_words(m)}"
        for name, m in metrics.items()
        if name in keys
    ]
    if "mem" in keys:
        parts.append(f"mem: {metrics['mem_used_gib'].unit} used/total")
    return ("Units: " + "; ".join(parts) + ".") if parts else ""


def _unit_words(metric: Metric) -> str:
    if metric.fmt == "pct":
        return "percent"
    return {"s": "seconds", "fraction": "fraction of 1", "": "plain number"}.get(
        metric.unit, metric.unit
    )


def _merged_columns(runs: list[RunRecord]) -> list[str]:
    merged: list[str] = []
    for run in runs:
        merged += [spec for spec in run.columns if spec not in merged]
    return merged


def _header(spec: str) -> str:
    return spec if QUALIFIED.match(spec) else _HEADERS.get(spec, spec)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(_md_escape(cell) for cell in cells) + " |"


def _md_escape(cell: str) -> str:
    # A pipe or a line break inside a cell would split the row.
    return " ".join(cell.split("\n")).replace("|", "\\|")


def precision_label(run: RunRecord) -> str:
    """The precision as the seeds label it, beside the math that ran where they differ.

    FlagPerf's A100 "fp32" rows ran TF32 matmuls (PyTorch's and NGC's defaults then), so
    the configs named after them run ``tf32`` and show "fp32 (TF32)"; an fp32 run whose
    matmuls something switched to TF32 or bf16 passes (its peak's math) shows the same way.
    A case whose seed page labels another precision names it in short_names: seed 000's GLM
    ran fp16 (``model.half()``) under the label fp32, ``"precision=fp16": fp32``, shown as
    "fp32 (FP16)".
    """
    page = run.short_names.get(f"precision={run.precision}")
    if page and page != run.precision:
        return f"{page} ({str(run.precision).upper()})"
    if run.precision not in ("fp32", "tf32"):
        return run.precision or "/"
    math = run.peak.math if run.peak else run.precision
    return "fp32" if math == "fp32" else f"fp32 ({math.upper()})"


def peak_text(run: RunRecord) -> str:
    """What the run's MFU figures divide, one line per figure (``fleetperf results RUN_ID``)."""
    peak = run.peak
    if peak is None:
        return (
            "peak: not reported (a base case runs no model: no MFU; or the run ended without"
            " a result, or before fleetperf kept it)"
        )
    mfu, measured_mfu = run.metrics.get("mfu"), run.metrics.get("mfu_measured")
    rows = [
        ("chip", peak.chip or "no datasheet entry"),
        ("math", peak.math),
        ("model FLOP/s per device", _flops(peak.model_flops_per_s_per_device)),
        ("datasheet peak", _flops(peak.datasheet_flops) + _divides("mfu", mfu)),
        ("measured peak", _flops(peak.measured_flops) + _divides("mfu_measured", measured_mfu)),
        ("measured memory bandwidth", _bytes_per_s(peak.measured_mem_bw_bytes_per_s)),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"  {name.ljust(width)}  {value}" for name, value in rows]
    return "\n".join(["peak (what MFU divides; per device):", *lines])


def hp_text(run: RunRecord, configured: dict[str, Any] | None) -> str:
    """The run's hyperparameters that differ from its config's (``configured``: the case's
    defaults under the config's overrides; None where this checkout lacks the config),
    for ``fleetperf results RUN_ID``: a capped or changed run says how."""
    where = f"{run.vendor}/{run.config}"
    if not run.hp:
        return "hyperparameters: not in the record (a run before fleetperf kept them)"
    if configured is None:
        every = format_fix_hp(run.hp, {})
        return f"hyperparameters ({where} is not in this checkout's catalog): {every}"
    differ = [k for k in sorted({*run.hp, *configured}) if run.hp.get(k) != configured.get(k)]
    if not differ:
        return f"hyperparameters: as {where} sets them"
    rows = [(k, _hp_shown(run.hp, k), _hp_shown(configured, k)) for k in differ]
    width = max(len(k) for k, _, _ in rows)
    lines = [f"  {k.ljust(width)}  {mine}  (config: {theirs})" for k, mine, theirs in rows]
    return "\n".join([f"hyperparameters that differ from {where}'s:", *lines])


def _hp_shown(hp: dict[str, Any], key: str) -> str:
    return _hp_value(hp[key]) if key in hp else "(unset)"


def config_env_text(run: RunRecord) -> str:
    """The environment variables the run's config set (``fleetperf results RUN_ID``)."""
    if not run.config_env:
        return "env from the config: none"
    lines = [f"  {name}={value}" for name, value in run.config_env.items()]
    return "\n".join(["env from the config ({data_dir}: the case's data directory):", *lines])


def monitoring_text(run: RunRecord, brief: bool = False) -> str:
    """The run's energy and monitoring tables (docs/monitoring.md) and their notes, for
    ``fleetperf results RUN_ID``; ``brief`` (``--batch``, a block per run): what was
    measured, and one line for what was not (the notes say why)."""
    summary = run.monitoring
    if summary is None:
        return (
            "energy and monitoring: no sys sample (the run ended before its workload sampled,"
            " or it ran before fleetperf kept them)"
        )
    lines = [f"energy and monitoring ({mon.sampled(summary)}):"]
    for header, rows in (
        (mon.ENERGY_HEADER, mon.energy_table(summary)),
        (mon.MONITORING_HEADER, mon.monitoring_table(summary)),
    ):
        if brief:
            header, rows = mon.measured(header, rows)
        if rows:
            lines += ["", _md_row(header), _md_row(["---"] * len(header))]
            lines += [_md_row(cells) for cells in rows]
    if brief:
        lacking = ", ".join(mon.unmeasured(summary))
        why = f"fleetperf results {short_id(run.run_id)} says why"
        lines.append(f"\nnot measured: {lacking} ({why})")
        return "\n".join(lines)
    lines.append(f"\n{mon.UNKNOWN}: not given by the hardware; empty: does not apply.")
    lines += [f"  - {note}" for note in summary["notes"]]
    return "\n".join(lines)


def _flops(value: float | None) -> str:
    return "/" if value is None else f"{value / 1e12:.4g} TFLOP/s"


def _bytes_per_s(value: float | None) -> str:
    return "/" if value is None else f"{value / 1e9:.4g} GB/s"


def _divides(metric: str, value: float | None) -> str:
    shown = "/" if value is None else f"{value * 100:.1f}%"
    return f"  ({metric} = model FLOP/s per device / this = {shown})"


def _cell(run: RunRecord, key: str, table_keys: set[str], metrics: dict[str, Metric]) -> str:
    if key == "precision":
        return precision_label(run)
    if key == "fix_hp":
        # Precision has its own column where the table has one (seed 001); otherwise it is
        # an override like any other (seed 003: "数据精度=fp16, local_batchsize=4").
        exclude = ("precision",) if "precision" in table_keys else ()
        return format_fix_hp(run.fix_hp, run.short_names, exclude)
    if key == "mem":
        used, total = run.metrics.get("mem_used_gib"), run.metrics.get("mem_total_gib")
        return "/" if used is None or total is None else f"{used:.1f}/{total:.1f}"
    value = run.metrics.get(key)
    if value is not None and key in _SEED_STYLE:
        return _SEED_STYLE[key](value)
    return metrics[key].show(value) if key in metrics else "/"


def _loss(value: float) -> str:
    # Up to 4 decimals as in the seeds ("3.0075", "1.64"), trailing zeros dropped.
    text = f"{value:.4f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _tokens(value: float) -> str:
    # Seeds print whole tokens/s ("2788"); tiny CPU runs would lose everything to rounding.
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


# Where the seeds' tables print a metric differently from the registry's plain format.
_SEED_STYLE = {"loss": _loss, "tokens_per_s_per_device": _tokens}


def _status_cell(run: RunRecord) -> str:
    cell = run.status
    if run.status != "passed" and run.error:
        cell += ": " + (run.error if len(run.error) <= 80 else run.error[:79] + "…")
    if run.loaded:
        cell += f" (loaded host: load {run.load_per_cpu:g} per CPU at start)"
    if run.synthetic_data:
        cell += " (synthetic data: fleetperf prepare --synthetic)"
    if run.smoke:
        cell += " (smoke: --smoke, a short run of the pipeline; not judged)"
    elif capped(run):
        cell += f" (capped: max_samples={run.fix_hp['max_samples']}, not a full run)"
    return cell


def capped(run: RunRecord) -> bool:
    """Cut short by a sample cap from --set or --smoke (its fix_hp names max_samples, which
    the catalog shows where the command line set it): its numbers are not a full run's."""
    return bool(run.fix_hp.get("max_samples"))


def export_text(records: Iterable[RunRecord], fmt: str) -> str:
    """An export file's text: markdown with each row's run id and date (a file outlives the
    screen that named its runs; CSV and JSON carry run_id and started anyway)."""
    return render(records, fmt, ids=fmt == "md") + "\n"


def render(records: Iterable[RunRecord], fmt: str, ids: bool = False) -> str:
    """The records in one of FORMATS: md (the seeds' tables), csv or json."""
    if fmt == "md":
        return to_markdown(records, ids)
    return {"csv": to_csv, "json": to_json}[fmt](records)
