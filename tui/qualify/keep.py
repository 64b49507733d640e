"""A qualification's verdicts kept in the results store (tui/results/qualifications.py).
The runs themselves are the store's records as any batch's, found by the batch ids kept
beside the verdicts."""

from __future__ import annotations

import secrets

from tui.qualify.output import Result
from tui.results import qualifications


def save(store_at: str, started: str, result: Result) -> str:
    """Keep ``result``'s verdicts; its qualification id."""
    qid = f"{started.replace(':', '').replace('-', '')}-qualify-{secrets.token_hex(4)}"
    rows = [
        {
            "qualification_id": qid,
            "host": v.host,
            "device": "" if v.device is None else str(v.device),
            "metric": v.metric,
            "started": started,
            "grp": result.group,
            "n": v.n,
            "median": v.median,
            "lo": v.lo,
            "hi": v.hi,
            "peer_median": v.peer_median,
            "ratio": v.ratio,
            "verdict": v.verdict,
            "reason": v.reason,
            "batch_ids": result.batch_ids,
        }
        for v in result.verdicts
    ]
    qualifications.save(rows, store_at)
    return qid
