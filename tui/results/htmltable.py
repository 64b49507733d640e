"""HTML tables of the report's pages (tui/results/report.py and its qualification section,
report_qualify.py): every header and cell HTML-escaped (tui/core/text.py html_text)."""

from __future__ import annotations

from tui.core.text import html_text


def breakable(text: str) -> str:
    """``text`` escaped, a line break allowed after each comma: a long fix_hp (no spaces)
    wraps within the page."""
    return html_text(text).replace(",", ",<wbr>")


def html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{breakable(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
