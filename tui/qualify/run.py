"""``fleetperf qualify``: the base suite on every host of a group, the links between them
pair by pair, one all-host all_reduce; each host judged against its peers (judge.py).

The runs are the engine's (Session, Batch): planned here with their hosts pinned, started
as batches, their records kept in the store as any batch's. Hosts sharing one machine (one
boot id, as `fleetperf fleet up` hosts do) run one at a time: side by side they would
measure each other. Every run has a time budget (the case's timeout, --budget): a run that
does not finish within it is flagged, never waited on without end."""

from __future__ import annotations

import base64
import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TextIO

from tui.batch import drive
from tui.catalog import catalog
from tui.catalog.suites import load_suite
from tui.core.errors import InventoryError, UsageError
from tui.core.events import Event, RunFinished
from tui.core.term import printable
from tui.engine import hostcheck
from tui.engine.handles import RunPlan
from tui.engine.session import Session
from tui.executors.base import new_run_id
from tui.qualify import output
from tui.qualify.judge import Sample, judge, judge_links
from tui.qualify.records import covariates, link_samples, metric_label, rule_for
from tui.qualify.rules import suite_rules
from tui.qualify.schedule import pair_rounds
from tui.qualify.stragglers import Ranks, judge_ranks
from tui.results.record import RunRecord

HOST_SUITE, LINK_SUITE = "base", "base-interhost"


@dataclass
class QualifyArgs:
    inventory: Path
    results_dir: Path
    data_root: Path
    store: str | None = None
    group: str | None = None
    limit: str | None = None
    repeat: int = 3
    one_at_a_time: bool = False
    fmt: str = "md"
    sets: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)  # --case CASE[/CONFIG]: these rows only
    budget_s: int | None = None  # --budget: each run's limit (default: its case's timeout_s)
    wait_s: float = 0.0  # --wait: for a host another controller holds


@dataclass
class Measured:
    """What the runs gave: samples per host, values per link, what failed, the all-host
    all_reduce, and the batches' ids (the store's records of the runs)."""

    samples: list[Sample] = field(default_factory=list)
    links: dict[str, dict[tuple[str, str], list[float]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # FLAGGED lines: too slow, failed
    allreduce: RunRecord | None = None
    ranks: Ranks = field(default_factory=Ranks)  # the all_reduce's ranks judged
    batch_ids: list[str] = field(default_factory=list)
    refused: str | None = None  # a run refused before launch (bad input): its error
    stopped: bool = False  # Ctrl-C or SIGTERM


def pick_hosts(
    groups: dict[str, list[str]], group: str | None, limit: str | None
) -> tuple[str, list[str]]:
    """The group (the only one with hosts when none is named) and its hosts ``--limit``
    keeps; UsageError naming what is wrong."""
    if group is None:
        if len(groups) != 1:
            raise UsageError(
                f"the inventory has groups {', '.join(groups) or 'none'}: pick one with --group"
            )
        group = next(iter(groups))
    if group not in groups:
        raise UsageError(
            f"--group {group!r}: no such group with hosts (groups: {', '.join(groups) or 'none'})"
        )
    hosts = groups[group]
    if limit is not None:
        wanted = [h for h in (name.strip() for name in limit.split(",")) if h]
        unknown = [h for h in wanted if h not in hosts]
        if unknown or not wanted:
            name = unknown[0] if unknown else "no host"
            raise UsageError(f"--limit {limit!r}: {name} is not a host of group {group}")
        hosts = [h for h in hosts if h in wanted]
    return group, hosts


def boot_ids(session: Session, hosts: list[str]) -> dict[str, str]:
    """Each host's boot id (/proc/sys/kernel/random/boot_id): one ad-hoc read over the
    hosts' own connection. InventoryError naming the first host that did not answer."""
    inv = session.read_inventory()
    found = hostcheck.adhoc(
        inv.path, hosts, "ansible.builtin.slurp", "src=/proc/sys/kernel/random/boot_id"
    )
    ids = {}
    for host in hosts:
        res = found.get(host) or {}
        if res.get("kind") != "ok" or not isinstance(res.get("content"), str):
            why = " ".join(str(res.get("msg") or "no answer").split())
            raise InventoryError(f"host {host}: unreachable ({why})")
        ids[host] = base64.b64decode(res["content"]).decode(errors="replace").strip()
    return ids


def shared_machines(ids: dict[str, str]) -> list[list[str]]:
    """The sets of two or more hosts that share one boot id: one machine."""
    by_id: dict[str, list[str]] = {}
    for host, boot in ids.items():
        by_id.setdefault(boot, []).append(host)
    return [hosts for hosts in by_id.values() if len(hosts) > 1]


class Qualification:
    """One qualification of ``hosts``: plan, run, judge."""

    def __init__(
        self, args: QualifyArgs, session: Session, group: str, hosts: list[str], out: TextIO
    ) -> None:
        self.args, self.session, self.group, self.hosts, self.out = args, session, group, hosts, out
        self.host_rules = suite_rules(HOST_SUITE)
        self.link_rules = suite_rules(LINK_SUITE)
        sets = catalog.parse_sets(args.sets)
        self.host_specs = self._specs(HOST_SUITE, sets, nodes=1)
        self.link_specs = self._specs(LINK_SUITE, sets, nodes=2) if len(hosts) > 1 else []
        specs = self.host_specs + self.link_specs
        unused = [k for k in sets if not any(k in s.case.overridable for s in specs)]
        if unused:
            raise UsageError(f"--set {unused[0]}: no case of the qualification takes it")
        self.measured = Measured()
        self.requested = threading.Event()
        # Called as on_done("host" | "pair" | "allreduce", hosts) once a host's, a pair's or
        # the all_reduce's runs have ended and been folded into ``measured`` (the app's
        # Fleet view redraws from it); on the engine's thread.
        self.on_done: Callable[[str, tuple[str, ...]], None] | None = None

    # -- planning ----------------------------------------------------------------------

    def _specs(self, suite: str, sets: dict, nodes: int) -> list[catalog.RunSpec]:
        """The suite's rows on this group's vendor, on ``nodes`` nodes, that every host can
        run and whose case is judged; ``--set`` keys go to the cases that take them."""
        inv = self.session.read_inventory()
        judged = self.host_rules if suite == HOST_SUITE else self.link_rules
        specs = []
        for case_name, ref in load_suite(suite, cases_dir=self.session.cases_dir).pairs:
            if ref.partition("/")[0] != self.group or not self._picked(case_name, ref):
                continue
            case = catalog.load_case(case_name, self.session.cases_dir)
            if not any(m.name in judged for m in case.metrics):
                continue
            config = catalog.load_config(case, ref)
            fits = inv.candidates(config.vendor, config.chip, config.nproc_per_node)
            if config.nnodes != nodes or any(h not in fits for h in self.hosts):
                continue
            given = {k: v for k, v in sets.items() if k in case.overridable}
            spec = catalog.resolve(case, config, given)
            if self.args.budget_s is not None:  # the run's limit: the executors' timeout
                budgeted = dataclasses.replace(spec.case, timeout_s=self.args.budget_s)
                spec = spec.model_copy(update={"case": budgeted})
            specs.append(spec)
        return specs

    def _picked(self, case_name: str, ref: str) -> bool:
        """Whether ``--case CASE[/CONFIG]`` (none: every row) takes the suite's row."""
        name = ref.partition("/")[2]
        return not self.args.cases or any(
            c in (case_name, f"{case_name}/{name}") for c in self.args.cases
        )

    def _plans(
        self, specs: list[catalog.RunSpec], hosts: Sequence[str], repeat: int
    ) -> list[RunPlan]:
        return [
            RunPlan(new_run_id(s.case.name), s, list(hosts)) for _ in range(repeat) for s in specs
        ]

    # -- running -----------------------------------------------------------------------

    def run(self, one_at_a_time: bool) -> Measured:
        """The three phases in order; each waits for the one before."""
        if not self.host_specs:
            raise InventoryError(
                f"suite {HOST_SUITE}: no single-host run on group {self.group}'s hosts"
            )
        repeat = self.args.repeat
        hosts = [[h] for h in self.hosts]
        per_host = [self._plans(self.host_specs, h, repeat) for h in hosts]
        groups = per_host if one_at_a_time else [_interleave(per_host)]
        for plans in groups:
            self._run(plans, self._host_done, "host")
        if self.link_specs:
            for pairs in pair_rounds(self.hosts):
                per_pair = [self._plans(self.link_specs, pair, repeat) for pair in pairs]
                for plans in per_pair if one_at_a_time else [_interleave(per_pair)]:
                    self._run(plans, self._pair_done, "pair")
            allreduce = self._allreduce_spec()
            if allreduce is not None and len(self.hosts) > 2:
                plans = self._plans([allreduce], self.hosts, 1)
                self._run(plans, self._allreduce_done, "allreduce")
        return self.measured

    def _allreduce_spec(self) -> catalog.RunSpec | None:
        """The link suite's all_reduce row, its config on every host of the group."""
        spec = next((s for s in self.link_specs if s.hp.get("test") == "allreduce"), None)
        if spec is None:
            return None
        config = spec.config.model_copy(update={"nnodes": len(self.hosts)})
        return spec.model_copy(update={"config": config})

    def _run(
        self,
        plans: list[RunPlan],
        done: Callable[[list[RunRecord | None], RunPlan], None],
        kind: str,
    ) -> None:
        """One batch of ``plans``; ``done`` with a host's (or pair's) records once all its
        runs have ended, in the order they end."""
        if self.measured.refused or self.measured.stopped or not plans:
            return
        left: dict[tuple[str, ...], int] = {}
        for plan in plans:
            left[tuple(plan.hosts)] = left.get(tuple(plan.hosts), 0) + 1
        batch = self.session.start(plans)
        self.measured.batch_ids.append(batch.batch_id)
        by_id = {run.run_id: run for run in batch.runs}
        ended: dict[tuple[str, ...], list[RunRecord | None]] = {}
        lock = threading.Lock()

        def finished(ev: Event) -> None:
            if not isinstance(ev, RunFinished) or ev.run_id not in by_id:
                return
            run = by_id[ev.run_id]
            key = tuple(run.plan.hosts)
            with lock:
                ended.setdefault(key, []).append(run.record)
                if run.status == "bad_input":
                    self.measured.refused = run.error or "refused before launch"
                elif run.status in ("failed", "aborted") and not self.requested.is_set():
                    self._failed(run.plan, run.error or run.status)
                left[key] -= 1
                if left[key] == 0 and not self.measured.refused:
                    done(ended[key], run.plan)
                    if self.on_done is not None:
                        self.on_done(kind, key)

        batch.subscribe(finished)
        drive(batch, self.requested, self.out)
        batch.wait()
        if self.requested.is_set():
            self.measured.stopped = True

    def _failed(self, plan: RunPlan, error: str) -> None:
        what = "host" if len(plan.hosts) == 1 else ("link" if len(plan.hosts) == 2 else "all hosts")
        budget = plan.spec.case.timeout_s
        slow = "timed out" in error or "stall" in error
        why = f"too slow: not done within its budget of {budget} s" if slow else f"failed: {error}"
        run = f"{plan.spec.case.name} {plan.spec.config.name}"
        self.measured.failures.append(f"FLAGGED {what} {' '.join(plan.hosts)}: {run} {why}")

    def _host_done(self, records: list[RunRecord | None], plan: RunPlan) -> None:
        host = plan.hosts[0]
        kept = [r for r in records if r is not None and r.status == "passed"]
        for record in kept:
            busy, throttle = covariates(record)
            for name, value in record.metrics.items():
                if name in self.host_rules and value is not None:
                    label = metric_label(record, name)
                    self.measured.samples.append(
                        Sample(host, None, label, float(value), busy, throttle)
                    )
        self._say(f"host {host}: {len(kept)} of {len(records)} runs passed")

    def _pair_done(self, records: list[RunRecord | None], plan: RunPlan) -> None:
        a, b = plan.hosts
        kept = [r for r in records if r is not None and r.status == "passed"]
        shown = []
        for label, pairs in link_samples(kept, self.link_rules).items():
            for pair, values in pairs.items():
                self.measured.links.setdefault(label, {}).setdefault(pair, []).extend(values)
        for label, pairs in self.measured.links.items():
            if (a, b) in pairs:
                shown.append(f"{label} {median(pairs[(a, b)]):.4g}")
        shown_text = ", ".join(shown) or "nothing measured"
        self._say(f"pair {a} {b}: {len(kept)} of {len(records)} runs passed; {shown_text}")

    def _allreduce_done(self, records: list[RunRecord | None], plan: RunPlan) -> None:
        record = records[0] if records else None
        self.measured.allreduce = (
            record if record is not None and record.status == "passed" else None
        )
        value = self.measured.allreduce.metrics.get("bus_gbps") if self.measured.allreduce else None
        shown = f"bus_gbps {value:.4g}" if value is not None else "nothing measured"
        self._say(f"all_reduce over {len(plan.hosts)} hosts: {shown}")
        if self.measured.allreduce is not None:
            self.measured.ranks = judge_ranks(self.measured.allreduce, self.link_rules)
            for note in self.measured.ranks.notes:
                self._say(f"all_reduce stragglers: {note}")

    def _say(self, line: str) -> None:
        """A progress line, to the stream the front end gave (the app's: its log)."""
        self.out.write(printable(line) + "\n")
        self.out.flush()

    # -- judging -----------------------------------------------------------------------

    def judged(self) -> output.Result:
        """The verdicts of the samples and the links."""
        rules = {s.metric: rule_for(s.metric, self.host_rules) for s in self.measured.samples}
        verdicts = judge(self.measured.samples, rules, self.args.repeat)
        links = {
            label: judge_links(pairs, rule_for(label, self.link_rules))
            for label, pairs in sorted(self.measured.links.items())
        }
        return output.Result(
            group=self.group,
            hosts=self.hosts,
            repeat=self.args.repeat,
            verdicts=verdicts,
            link_values=self.measured.links,
            links=links,
            failures=self.measured.failures,
            allreduce=self.measured.allreduce,
            stragglers=self.measured.ranks.stragglers,
            ranks_judged=self.measured.ranks.judged,
            batch_ids=self.measured.batch_ids,
        )


def _interleave(groups: list[list[RunPlan]]) -> list[RunPlan]:
    """Plans of several hosts (or pairs), one of each in turn: the batch starts the first
    of each together, as none shares a host."""
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out
