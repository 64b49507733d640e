"""The Fleet view's state of one qualification as it goes (no textual): each host's state,
the pair rounds done of N-1, and the verdicts judged so far (tui.qualify's, never
recomputed here). The screen draws it; the qualification's thread updates it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.qualify.output import Result
from tui.qualify.schedule import pair_rounds

# The worse verdict wins a host's state; a host all of whose links are slow is flagged.
WORSE = {"ok": 0, "inconclusive": 1, "flagged": 2}


@dataclass
class FleetProgress:
    hosts: list[str]
    one_at_a_time: bool = False  # hosts on one machine: measured one after another
    started: bool = False
    done_hosts: set[str] = field(default_factory=set)
    done_pairs: set[frozenset[str]] = field(default_factory=set)
    allreduce_done: bool = False
    result: Result | None = None  # judged so far; final once ``final``
    final: bool = False
    ended: str | None = None  # why it ended unjudged: refused, stopped
    rounds: list[list[tuple[str, str]]] = field(init=False)

    def __post_init__(self) -> None:
        self.rounds = pair_rounds(self.hosts) if len(self.hosts) > 1 else []

    def done(self, kind: str, hosts: tuple[str, ...], result: Result) -> None:
        """A host, pair or the all-host all_reduce finished; ``result``: judged so far."""
        if kind == "host":
            self.done_hosts.update(hosts)
        elif kind == "pair":
            self.done_pairs.add(frozenset(hosts))
        else:
            self.allreduce_done = True
        self.result = result

    def finish(self, result: Result) -> None:
        self.result, self.final = result, True

    def end(self, why: str) -> None:
        self.ended = why

    @property
    def rounds_done(self) -> int:
        return sum(all(frozenset(p) in self.done_pairs for p in r) for r in self.rounds)

    def state(self, host: str) -> str:
        """queued, measuring, measured, then its verdict once judged (the worst of its
        metrics and its links)."""
        if self.final and self.result is not None:
            return self.verdict(host)
        if self.ended is not None:
            return "measured" if host in self.done_hosts else "not measured"
        if host in self.done_hosts:
            return "measured" if len(self.done_hosts) < len(self.hosts) else "links"
        if not self.started:
            return "queued"
        waiting = [h for h in self.hosts if h not in self.done_hosts]
        return "measuring" if not self.one_at_a_time or waiting[0] == host else "queued"

    def verdict(self, host: str) -> str:
        result = self.result
        if result is None:
            return "-"
        verdicts = [v.verdict for v in result.verdicts if v.host == host]
        if any(host in report.hosts for report in result.links.values()):
            return "flagged (links)"
        return max(verdicts, key=WORSE.__getitem__, default="-")

    def summary(self) -> str:
        """The line above the table: phase and counts."""
        n = len(self.hosts)
        if self.final:
            return f"judged: {n} hosts, {len(self.done_pairs)} pairs"
        if self.ended is not None:
            return f"not judged: {self.ended}"
        hosts = f"hosts measured {len(self.done_hosts)} of {n}"
        rounds = f"rounds done {self.rounds_done} of {len(self.rounds)}" if self.rounds else ""
        return "; ".join(x for x in (hosts, rounds) if x)
