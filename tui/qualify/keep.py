"""A qualification's verdicts kept in the results store (tui/results/qualifications.py).
The runs themselves are the store's records as any batch's, found by the batch ids kept
beside the verdicts."""

from __future__ import annotations

import secrets

from tui.qualify import output
from tui.qualify.output import Result
from tui.results import qualifications


def save(store_at: str, started: str, result: Result) -> str:
    """Keep ``result``'s verdicts; its qualification id."""
    qid = f"{started.replace(':', '').replace('-', '')}-qualify-{secrets.token_hex(4)}"
    kept = {"qualification_id": qid, "started": started, "grp": result.group}
    kept["batch_ids"] = result.batch_ids
    rows = [
        {**row, **kept, "device": "" if row["device"] is None else str(row["device"])}
        for row in output.rows(result)
    ]
    qualifications.save(rows, store_at)
    return qid
