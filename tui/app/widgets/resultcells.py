"""What the Results screen shows of runs as Rich text: the run list's cells, a run's
verdict, two runs compared (tui/results/compare.py)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from tui.app.safe import literal
from tui.results.compare import compare, metric_label
from tui.results.record import RunRecord
from tui.results.report import fmt_band
from tui.results.rows import RunRow


def status_cell(row: RunRow) -> Text:
    """The status, smoke or capped where the run was cut short (issue 41: not a full run),
    and the metrics the run's verdict flagged (docs/references.md)."""
    text = literal(row.status)
    if row.smoke or row.capped:
        text.append(" smoke" if row.smoke else " capped", style="dim")
    if row.flagged:
        text.append(f" ! {', '.join(row.flagged)}", style="bold red")
    return text


def mark_cell(marked: bool) -> Text:
    return Text("[x]" if marked else "[ ]")


def metric_cell(row: RunRow, key: str, fmt: str) -> str:
    value = row.metrics.get(key)
    return "/" if value is None else format(value, fmt)


def verdict_table(record: RunRecord) -> Table:
    """Each metric the run was judged on: its value, the band and where the band came from."""
    table = Table(
        title=literal(f"verdict of {record.run_id}", style="table.title"),
        title_justify="left",
        expand=True,
    )
    for name in ("metric", "value", "band", "from", ""):
        table.add_column(name, justify="right" if name in ("value", "band") else "left")
    for metric, value, band, basis, flagged in check_rows(record):
        flag = Text("! outside", style="bold red") if flagged else Text("")
        table.add_row(literal(metric), literal(value), literal(band), literal(basis), flag)
    for note in record.verdict.notes if record.verdict else []:
        table.add_row("", "", "", literal(note), Text(""))
    return table


def compare_table(
    before: RunRecord, after: RunRecord, history: Sequence[RunRecord | RunRow]
) -> Table:
    """``history``: records, or rows (what compare reads of a run, under the same names)."""
    comparison = compare(before, after, history)
    title = literal(
        f"{after.case}: {before.vendor}/{before.config} {before.run_id}  vs  "
        f"{after.vendor}/{after.config} {after.run_id}",
        style="table.title",  # what Rich gives a str title
    )
    if comparison.differs:  # never compared as like for like without a word
        title.append(
            literal(f"\nnot like for like: {'; '.join(comparison.differs)}", style="bold yellow")
        )
    apart = comparison.load_apart
    table = Table(
        title=title,
        title_justify="left",
        caption=literal(
            f"earlier spread: {comparison.spread_runs} comparable passed run(s) of the newer"
            " run" + (f"; {apart}" if apart else "")
        ),
        caption_justify="left",
        expand=True,
    )
    for name in ("metric", "before", "after", "change", "earlier spread", ""):
        table.add_column(name, justify="left" if name in ("metric", "") else "right")
    for row in comparison.changes:
        m = row.metric
        change = "-" if row.change is None else f"{row.change * 100:+.1f}%"
        style = {True: "green", False: "red", None: ""}[row.better]
        spread = (
            "too few runs"
            if row.spread is None
            else f"{m.show(row.spread[0])}..{m.show(row.spread[1])}"
        )
        flag = Text("! outside", style="bold red") if row.outside else Text("")
        table.add_row(
            literal(metric_label(m)),
            literal(m.show(row.before)),
            literal(m.show(row.after)),
            Text(change, style=style),
            literal(spread),
            flag,
        )
    return table


def check_rows(record: RunRecord) -> list[tuple[str, str, str, str, bool]]:
    """The verdict as rows for a screen: metric, value, band, where it came from, flagged."""
    if record.verdict is None:
        return []
    metrics = record.registry()
    rows = []
    for c in record.verdict.checks:
        m = metrics.get(c.metric)
        value = m.show(c.value) if m else f"{c.value:g}"
        band = fmt_band(m, c.low, c.high) if m else "?"
        rows.append((c.metric, value, band, c.basis, c.flagged))
    return rows
