"""A kept qualification's links, judged again as ``fleetperf qualify`` judged them. The store
keeps the host verdicts (tui/results/qualifications.py), not the pair matrix's: the link
samples are read back from the records of the qualification's batches and given to
judge_links with the link suite's rules. The judge draws nothing at random, so the same
samples give the command's verdicts, and the report (tui/results/report_qualify.py) marks
the pairs the command flagged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.qualify.judge import LinkReport, Rule, judge_links
from tui.qualify.records import link_samples, rule_for
from tui.qualify.rules import suite_rules
from tui.qualify.run import LINK_SUITE
from tui.results.record import RunRecord


def judged(
    rows: Sequence[Mapping[str, Any]],
    records: Iterable[RunRecord],
    rules: dict[str, Rule] | None = None,
) -> dict[str, LinkReport]:
    """The links of the qualification whose verdict ``rows`` (qualifications.latest's) are
    given, from those of ``records`` its batches ran; ``rules``: the link suite's."""
    batches = {b for row in rows for b in row["batch_ids"]}
    if not batches:
        return {}
    rules = suite_rules(LINK_SUITE) if rules is None else rules
    found = link_samples((r for r in records if r.batch_id in batches), rules)
    return {
        label: judge_links(pairs, rule_for(label, rules)) for label, pairs in sorted(found.items())
    }
