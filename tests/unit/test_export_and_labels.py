"""Issue 41 point 12: a markdown export names its runs (run id and date), and the compare
table labels a percentage as one (``mfu_measured (%)`` beside ``33.4%``, not ``(fraction)``)."""

from __future__ import annotations

import csv
import io
import json

from rich.console import Console
from seed_records import seed001_records

from tui.app.widgets.resultcells import compare_table
from tui.results.compare import metric_label
from tui.results.record import metric_registry
from tui.results.tables import export_text


def test_a_markdown_export_has_each_rows_run_id_and_date() -> None:
    records = seed001_records()
    text = export_text(records, "md")
    assert "| run | date | 配置 |" in text
    assert "| r1 | 2026-11-21 | A100单机8卡（1x8） |" in text
    assert text.endswith("\n")
    rows = list(csv.DictReader(io.StringIO(export_text(records, "csv"))))
    assert [(r["run_id"], r["started"][:10]) for r in rows][0] == ("r1", "2026-11-21")
    assert json.loads(export_text(records, "json"))[0]["run_id"] == "r1"


def test_a_percentage_is_labelled_as_one() -> None:
    registry = metric_registry([])
    assert metric_label(registry["mfu_measured"]) == "mfu_measured (%)"
    assert metric_label(registry["p_core"]) == "p_core (samples/s)"
    before, after = (
        r.model_copy(update={"metrics": {**r.metrics, "mfu_measured": mfu}})
        for r, mfu in zip(seed001_records()[:2], (0.334, 0.351), strict=True)
    )
    console = Console(record=True, width=160)
    console.print(compare_table(before, after, []))
    shown = console.export_text()
    assert "mfu_measured (%)" in shown and "33.4%" in shown
    assert "mfu_measured (fraction)" not in shown and "acc (fraction)" in shown
