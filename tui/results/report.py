"""``fleetperf report``: one self-contained HTML page of the results store.

Per case: the seeds' table (the newest passed run of each config and hyperparameters),
throughput per config across vendors with the configs' references drawn, every metric's
history per comparable series with its band (tui/results/references.py's rule) and the points
the runs' verdicts flagged, and the newest run's loss curve from its ``events.jsonl``;
above them the newest qualification (report_qualify.py).

Charts are SVG (report_charts.py): no plotting library, no script, nothing fetched, so the page
opens offline anywhere and stays small (docs/references.md says why). Every string from a
record, a host or a config is HTML-escaped, its control and bidi characters shown as
``\\uXXXX`` (tui/core/text.py); every number is drawn at a finite coordinate, however extreme.
Controller code: no torch, no textual.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from harness.metrics import Metric

from tui.catalog import catalog
from tui.core import safefile
from tui.core.errors import CatalogError
from tui.core.text import html_text
from tui.results import monitoring_tables as mon
from tui.results import report_curve, report_qualify
from tui.results.htmltable import breakable, html_table
from tui.results.record import RunRecord, is_run_id
from tui.results.references import Reference, comparable_key, history_band
from tui.results.report_charts import fmt_band, history_chart, loss_chart, throughput_chart
from tui.results.tables import capped, case_table, format_fix_hp

MAX_POINTS = 200  # a history chart shows a series' newest this many runs
MAX_EVENTS_BYTES = 64 * 2**20  # read no more of an events.jsonl than this

# A case's headline throughput (the seeds' bold column): the first of these it has.
THROUGHPUT_ORDER = (
    "p_core",
    "tokens_per_s_per_device",
    "p_infer_core",
    "p_val_core",
    "p_train",
    "p_whole",
    "p_infer_whole",
    "p_val_whole",
)


def headline(metrics: Iterable[str]) -> str | None:
    """The headline throughput among ``metrics`` (the first of ``THROUGHPUT_ORDER``)."""
    have = set(metrics)
    return next((m for m in THROUGHPUT_ORDER if m in have), None)


# The font stack names local fonts with Han glyphs (Linux, Windows, macOS) after system-ui,
# whose font may have none: the seeds' labels are Chinese ("CPU单机单卡（1x1）"). No web
# font: the page fetches nothing.
CSS = """
body{font-family:system-ui,"Noto Sans CJK SC","Source Han Sans SC","WenQuanYi Micro Hei",
"WenQuanYi Zen Hei","Microsoft YaHei","PingFang SC","Hiragino Sans GB",sans-serif;
margin:1.5em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.2em .5em;text-align:left}
th{background:#eee} .flag{color:#b00;font-weight:bold} .note{color:#555;font-size:.9em}
svg{display:block;margin:.3em 0 1em} svg text{font-size:11px;fill:#333}
.axis{stroke:#888} .grid{stroke:#ddd} .band{fill:#4a90d9;opacity:.18}
.bound{stroke:#b00;stroke-dasharray:4 3;fill:none} .line{stroke:#4a90d9;fill:none}
.pt{fill:#4a90d9} .flagged{fill:#d00} .bar{fill:#4a90d9} .ref{stroke:#b00;stroke-width:2}
.refband{fill:#b00;opacity:.12} .loss{stroke:#2a7;fill:none;stroke-width:1.5}
"""


_e = html_text


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


# -- data -----------------------------------------------------------------------------


def step_curve(results_dir: Path, run_id: str, field: str) -> list[tuple[int, float]]:
    """(step, value of ``field``: loss, throughput...) of a run's step records in
    ``<results>/runs/<run_id>/events.jsonl``, the first record of each step (every node's
    rank 0 reports the whole job's figures); the file is read only where it is a regular
    file, neither it nor its run directory a link (tui/core/safefile.py open_regular)."""
    if not is_run_id(run_id):
        return []
    path = Path(os.path.abspath(results_dir)) / "runs" / run_id / "events.jsonl"
    try:
        f = safefile.open_regular(path)
    except OSError:
        return []
    curve: dict[int, float] = {}
    with f:
        for raw in f.read(MAX_EVENTS_BYTES).splitlines():
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(ev, dict) or ev.get("type") != "MetricSample":
                continue
            step, value = ev.get("step"), ev.get(field)
            if isinstance(step, int) and isinstance(value, int | float) and math.isfinite(value):
                curve.setdefault(step, float(value))
    return sorted(curve.items())


def config_references(case: str) -> dict[str, list[Reference]]:
    """vendor/config -> its references, from the catalog (none for a case it lacks)."""
    try:
        spec = catalog.load_case(case)
        return {ref: catalog.load_config(spec, ref).references for ref in catalog.config_refs(spec)}
    except CatalogError:
        return {}


def series(records: Sequence[RunRecord]) -> dict[tuple, list[RunRecord]]:
    """Comparable runs (tui/results/references.py's key), passed only, oldest first."""
    out: dict[tuple, list[RunRecord]] = {}
    for r in sorted(records, key=lambda r: (r.started, r.run_id)):
        if r.status == "passed":
            out.setdefault(comparable_key(r), []).append(r)
    return out


def rolling_bands(
    metric: Metric, runs: Sequence[RunRecord]
) -> list[tuple[float | None, float | None, float, float] | None]:
    """The band each run was held to: the rule applied to the runs before it."""
    bands, earlier = [], []
    for r in runs:
        bands.append(history_band(earlier, metric))
        if (v := r.metrics.get(metric.name)) is not None:
            earlier.append(v)
    return bands


def _flagged(run: RunRecord, metric: str) -> bool:
    return run.verdict is not None and any(c.metric == metric for c in run.verdict.flagged)


def _series_title(runs: list[RunRecord], differ: str = "") -> str:
    r = runs[-1]
    hp = format_fix_hp(r.fix_hp, r.short_names) + (f" ({differ})" if differ else "")
    accel = r.environment.get("accelerator") or "accelerator not reported"
    data = "synthetic data" if r.synthetic_data else "real data"
    return f"{r.vendor}/{r.config}, {hp}, {accel}, {data}: {len(runs)} passed run(s)"


def series_titles(groups: dict[tuple, list[RunRecord]]) -> dict[tuple, str]:
    """Each series' heading; series that would read alike (their fix_hp hides a run
    setting such as max_samples, which comparable_key holds) name the settings where
    they differ: never two groups under one heading."""
    plain = {key: _series_title(runs) for key, runs in groups.items()}
    titles = dict(plain)
    for title in set(plain.values()):
        alike = [key for key, t in plain.items() if t == title]
        if len(alike) < 2:
            continue
        hps = {key: dict(groups[key][-1].hp) for key in alike}
        names = sorted({k for hp in hps.values() for k in hp})
        differ = [k for k in names if len({repr(hp.get(k)) for hp in hps.values()}) > 1]
        for key in alike:
            shown = {k: hps[key].get(k, "(unset)") for k in differ}
            titles[key] = _series_title(groups[key], format_fix_hp(shown, {}))
    return titles


# -- the page -------------------------------------------------------------------------


def short_of_full(run: RunRecord) -> str:
    """Why a passed run is not a config's full, judged run ('' when it is): a smoke run,
    a capped one, one not judged (--no-judge)."""
    if run.smoke:
        return "a smoke run (--smoke)"
    if capped(run):
        return f"capped (max_samples={run.fix_hp['max_samples']})"
    return "not judged (--no-judge)" if run.verdict is None else ""


def newest_per_config(records: Sequence[RunRecord]) -> list[RunRecord]:
    """The seeds' table's rows: per config, the newest passed run of each fix_hp among its
    full, judged runs; only where a config has none, among its smoke, capped or unjudged
    ones (the page says so: short_of_full)."""
    passed: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        if r.status == "passed":
            passed.setdefault((r.vendor, r.config), []).append(r)
    newest: dict[tuple, RunRecord] = {}
    for runs in passed.values():
        full = [r for r in runs if not short_of_full(r)]
        for r in full or runs:
            newest[(r.vendor, r.config, json.dumps(r.fix_hp, sort_keys=True))] = r
    return sorted(newest.values(), key=lambda r: (r.vendor, r.config, r.started))


def _throughput_metric(
    records: Sequence[RunRecord], refs: dict[str, list[Reference]]
) -> str | None:
    have = {k for r in records for k, v in r.metrics.items() if v is not None}
    have |= {ref.metric for rs in refs.values() for ref in rs}
    return headline(have)


def _case_section(
    case: str, records: list[RunRecord], shown: list[RunRecord], results_dir: Path
) -> Iterator[str]:
    yield f'<section class="case" id="case-{_slug(case)}"><h2>{_e(case)}</h2>'
    newest = newest_per_config(shown)
    if newest:
        header, rows, legend = case_table(newest, ids=True)
        yield "<h3>The seeds' table (newest passed run per config and hyperparameters)</h3>"
        yield html_table(header, rows) + (f'<p class="note">{_e(legend)}</p>' if legend else "")
        short = [
            f"{r.vendor}/{r.config}: run {r.run_id} is {why}, the only kind of run it has"
            for r in newest
            if (why := short_of_full(r))
        ]
        if short:
            items = "".join(f"<li>{_e(line)}</li>" for line in short)
            yield f'<p class="flag">Not full, judged runs:</p><ul class="note">{items}</ul>'
        yield "<h3>Energy and monitoring of the same runs (from their sys samples)</h3>"
        for run in newest:
            yield from _monitoring_tables(run)
        yield from report_curve.sections(newest)
    refs = config_references(case)
    registry = records[-1].registry()
    name = _throughput_metric(shown, refs)
    if name:
        bars = [(f"{r.vendor}/{r.config}", r.metrics.get(name)) for r in newest]
        drawn = {k: [r for r in v if r.metric == name] for k, v in refs.items()}
        drawn = {k: v for k, v in drawn.items() if v}
        yield "<h3>Throughput per config (red: the config's references and their bands)</h3>"
        yield throughput_chart(registry[name], bars, drawn)
    yield from _references_table(refs, registry, newest)
    yield "<h3>History (band: median of the last runs ± max(3 MADs, tolerance); red: flagged)</h3>"
    shown_ids = {r.run_id for r in shown}
    groups = series(records)
    titles = series_titles(groups)
    for key, runs in groups.items():
        window = [r for r in runs if r.run_id in shown_ids]
        if not window:
            continue
        yield f"<h4>{breakable(titles[key])}</h4>"
        if len(window) < 2:  # one point is no history: its figures are in the table above
            yield '<p class="note">one run shown: a history chart needs two</p>'
            continue
        for metric in registry.values():
            if metric.higher_is_better is None or all(
                r.metrics.get(metric.name) is None for r in window
            ):
                continue
            have = [r for r in runs if r.metrics.get(metric.name) is not None]
            bands = rolling_bands(metric, have)
            keep = [i for i, r in enumerate(have) if r.run_id in shown_ids][-MAX_POINTS:]
            pts = [have[i] for i in keep]
            yield history_chart(
                metric, pts, [bands[i] for i in keep], [_flagged(r, metric.name) for r in pts]
            )
    last = shown[-1]
    curve = step_curve(results_dir, last.run_id, "loss")
    if len(curve) < 2 and all(r.metrics.get("loss") is None for r in shown):
        yield "</section>"  # a base case: no loss to draw, and none missing
        return
    yield f"<h3>Loss curve of the newest run ({_e(last.run_id)}, {_e(last.status)})</h3>"
    if len(curve) >= 2:
        yield loss_chart(curve)
    else:
        yield f'<p class="note">no loss in runs/{_e(last.run_id)}/events.jsonl</p>'
    yield "</section>"


def _monitoring_tables(run: RunRecord) -> Iterator[str]:
    """One run's energy and monitoring tables (FlagPerf's) and their notes."""
    yield f"<h4>{_e(f'{run.vendor}/{run.config}, run {run.run_id}')}</h4>"
    summary = run.monitoring
    if summary is None:
        yield '<p class="note">no sys sample in this run</p>'
        return
    yield f'<p class="note">{_e(mon.sampled(summary))}</p>'
    yield html_table(mon.ENERGY_HEADER, mon.energy_table(summary))
    yield html_table(mon.MONITORING_HEADER, mon.monitoring_table(summary))
    notes = [
        f"{mon.UNKNOWN}: not given by the hardware; empty: does not apply.",
        *summary["notes"],
    ]
    yield '<ul class="note">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"


def _references_table(
    refs: dict[str, list[Reference]], registry: dict[str, Metric], newest: list[RunRecord]
) -> Iterator[str]:
    rows = []
    for config, rs in refs.items():
        for ref in rs:
            metric = registry.get(ref.metric)
            if metric is None:
                continue
            lo, hi = ref.bounds(metric)
            rows.append(
                [
                    config,
                    ref.metric,
                    f"{metric.show(ref.value)} {ref.unit}".strip(),
                    fmt_band(metric, lo, hi),
                    ref.device or config.split("/")[1].split("x")[0],
                    format_fix_hp(ref.hp, {}),
                    ref.source,
                ]
            )
    if rows:
        yield "<h3>References (judged only on their device, with their hyperparameters)</h3>"
        yield html_table(["config", "metric", "value", "band", "device", "hp", "source"], rows)
    flagged = [
        [
            r.run_id,
            f"{r.vendor}/{r.config}",
            c.metric,
            registry[c.metric].show(c.value) if c.metric in registry else str(c.value),
            fmt_band(registry[c.metric], c.low, c.high) if c.metric in registry else "",
            c.basis,
        ]
        for r in newest
        if r.verdict
        for c in r.verdict.flagged
    ]
    if flagged:
        yield '<h3 class="flag">Flagged in the newest runs</h3>'
        yield html_table(["run", "config", "metric", "value", "band", "band from"], flagged)


def render(
    records: Sequence[RunRecord],
    results_dir: Path,
    since: str | None = None,
    title: str = "fleetperf report",
    qualification: Sequence[dict] = (),
    links: Mapping[str, report_qualify.Matrix] | None = None,
) -> str:
    """The page: ``records`` are every run of the cases to show (history needs the runs
    before ``since``); the page shows runs started at or after ``since``, after the newest
    qualification's verdicts (``qualifications.latest``'s rows) and its links as judged
    (``links``: tui/qualify/links.py's), if any."""
    by_case: dict[str, list[RunRecord]] = {}
    for r in sorted(records, key=lambda r: (r.started, r.run_id)):
        by_case.setdefault(r.case, []).append(r)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{CSS}{report_qualify.CSS}</style></head><body><h1>{_e(title)}</h1>",
        f'<p class="note">Generated {now} from {len(records)} run(s)'
        + (f", showing runs since {_e(since)}" if since else "")
        + ". Offline page: charts are inline SVG; hover a point for its run.</p>",
    ]
    parts.extend(report_qualify.section(qualification, links or {}))
    sections = []
    for case, runs in by_case.items():
        shown = [r for r in runs if since is None or r.started >= since]
        if shown:
            sections.append(case)
            parts.extend(_case_section(case, runs, shown, results_dir))
    if not sections and not qualification:
        parts.append("<p>No runs match.</p>")
    else:
        nav = " · ".join(f'<a href="#case-{_slug(c)}">{_e(c)}</a>' for c in sections)
        parts.insert(2, f"<nav>{nav}</nav>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_report(path: Path, text: str) -> None:
    """Never a half page, never through a link planted beside it (tui/core/safefile.py)."""
    safefile.write_text(path, text)
