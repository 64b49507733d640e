"""The engine: plan runs, execute them on free hosts, record and store what they did.

Both front ends drive it: ``--batch`` (tui/batch.py, a printer) and the terminal app
(tui/app/). ``Session.plan`` checks everything before anything starts; ``Session.start``
runs the plans in background threads (a ``Batch`` of ``RunHandle``: tui/engine/handles.py;
a run another controller runs is followed: tui/engine/following.py), runs that share no
host at the same time: those that can start together through one executor of their hosts'
kind (tui/executors/kinds.py: one play of run.yml over all their hosts, or a play of each
run's own), each run ending, and freeing its hosts, as soon as its own hosts are done. The
engine asks each kind's rules (its hosts, plan checks, launch) without naming a kind.
Callbacks run on engine threads. No torch, no textual.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tui.catalog import catalog
from tui.core import liveness, paths, stream
from tui.core.errors import InventoryError, UsageError
from tui.core.events import (
    DROPPED,
    RunStarted,
)
from tui.core.paths import default_data_root
from tui.engine import hostcheck
from tui.engine.following import FOLLOW_POLL_S, FollowedRun, owner_text
from tui.engine.handles import Batch, RunHandle, RunPlan
from tui.engine.inventory import Inventory, executor_of, load_inventory, select_hosts
from tui.engine.runrecord import finished_record, running_record
from tui.executors.base import (
    DEFAULT_KIND,
    Executor,
    Launch,
    Outcome,
    controller_vars,
    new_run_id,
)
from tui.executors.hostfiles import host_file_limits
from tui.executors.kinds import Placed
from tui.executors.registry import KINDS, executor_for, executor_for_launch
from tui.executors.stop import STOPPED
from tui.results import references
from tui.results.interrupted import controller_id, mark_interrupted
from tui.results.record import RunRecord, is_run_id, write_result_json

if TYPE_CHECKING:
    from tui.results.store import ResultStore

# An internal error's traceback: to stderr where no front end took the logger (logging's
# last resort), to the app's log file in the app (tui/app/__init__.py).
_LOG = logging.getLogger(__name__)


class Session:
    """Plans and runs cases against one inventory, one results directory, one data root."""

    def __init__(
        self,
        inventory: Path,
        results_dir: Path,
        data_root: Path,
        cases_dir: Path = paths.CASES_DIR,
        lease_wait_s: float = 0.0,
        judge: bool = True,
        store: str | None = None,
    ) -> None:
        self.inventory = inventory
        # Where the results store is (--store): a path, sqlite:///PATH or postgresql://...
        self.store_at = store or paths.default_store(results_dir)
        self.judge = judge  # passed runs get a verdict (tui/results/references.py)
        self.cases_dir = cases_dir
        self.lease_wait_s = lease_wait_s  # how long a run waits for a host another holds
        self.results_dir = results_dir
        self.data_root = data_root
        self._inventory: Inventory | None = None
        self._store: ResultStore | None = None  # opened at first use (open_store)
        self._store_lock = threading.Lock()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def plan(
        self,
        pairs: list[tuple[str, str]],
        sets: dict | None = None,
        repeat: int = 1,
        smoke: bool = False,
    ) -> list[RunPlan]:
        """Every case x config resolved (``smoke``: each case's smoke run) and given hosts;
        CatalogError (one line) on bad input."""
        if repeat < 1:
            raise UsageError(f"--repeat {repeat}: must be at least 1")
        host_file_limits()  # a bad FLEETPERF_MAX_*_MIB: refused before any launch
        for kind in KINDS.values():  # a bad setting of a kind's (FLEETPERF_DIRECT) too
            kind.check_settings()
        specs = []
        for case_name, ref in pairs:
            case = catalog.load_case(case_name, self.cases_dir)
            # resolve refuses a precision the vendor or chip cannot run, before any launch
            specs.append(catalog.resolve(case, catalog.load_config(case, ref), sets, smoke))
        inv = self._inventory or self.read_inventory()
        used: dict[str, int] = {}
        plans = []
        for spec in specs:
            for _ in range(repeat):
                hosts = select_hosts(inv, spec, used)
                for kind in dict.fromkeys(KINDS[executor_of(inv, h)] for h in hosts):
                    kind.check_plan(spec, hosts, inv.var)
                for host in hosts:
                    used[host] = used.get(host, 0) + 1
                plans.append(RunPlan(new_run_id(spec.case.name), spec, hosts))
        return plans

    def start(self, plans: list[RunPlan]) -> Batch:
        batch = Batch(self._execute, plans)
        batch._thread.start()
        return batch

    def _launch(self, plan: RunPlan) -> Launch:
        inv = self._inventory or self.read_inventory()
        follow = {h: how for h in plan.hosts if (how := stream.reach(h, inv.hostvars.get(h, {})))}
        kind = KINDS[executor_of(inv, plan.hosts[0])]
        here = controller_vars(self.results_dir, self.data_root)
        hostvars = inv.hostvars.get(plan.hosts[0], {})
        prepared = kind.prepare(
            Placed(plan.spec, plan.hosts, inv.var, hostvars, self.inventory, here)
        )
        return Launch(
            spec=plan.spec,
            run_id=plan.run_id,
            hosts=plan.hosts,
            inventory=self.inventory,
            results_dir=self.results_dir,
            data_root=self.data_root,
            lease_wait_s=self.lease_wait_s,
            follow=follow,
            executor=kind.name,
            **prepared,
        )

    def _execute(
        self, runs: list[RunHandle], batch_id: str, ended: Callable[[RunHandle], None]
    ) -> None:
        """Start runs on disjoint hosts together, one executor for the runs of each kind's
        executor; ``ended`` for each run once it has ended."""
        begun = []
        for run in runs:
            launch = self._launch(run.plan)
            record = running_record(launch, batch_id)
            self.store.add(record)  # 'running': a controller killed now leaves a trace
            run.status = "running"
            spec = run.plan.spec
            hosts = run.plan.hosts
            run._emit(RunStarted(run.run_id, spec.case.name, spec.config.ref, hosts, time.time()))
            begun.append((run, launch, record))
        kinds: dict[type[Executor], list[tuple[RunHandle, Launch, RunRecord]]] = {}
        for run, launch, record in begun:
            kinds.setdefault(executor_for_launch(launch), []).append((run, launch, record))
        threads = []
        for kind, group in kinds.items():
            executor = kind([(launch, run._emit, run._cancel) for run, launch, _ in group])
            threads.append(threading.Thread(target=executor.run, daemon=True))
            for run, launch, record in group:
                outcome = partial(executor.outcome, run.run_id)
                discard = partial(executor.discard, run.run_id)
                threads.append(
                    threading.Thread(
                        target=self._conclude,
                        args=(run, launch, record, outcome, discard, ended),
                        name=run.run_id,
                        daemon=True,
                    )
                )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _conclude(
        self,
        run: RunHandle,
        launch: Launch,
        record: RunRecord,
        outcome_of: Callable[[], Outcome],
        discard: Callable[[], None],
        ended: Callable[[RunHandle], None],
    ) -> None:
        """Wait for the run's outcome; keep its record (or, refused, nothing: ``discard``
        removes its directory)."""
        spec = run.plan.spec
        try:
            try:
                outcome = outcome_of()
            except Exception as exc:  # a bug: the record says so; the remote work is stopped
                _LOG.exception("internal error")
                outcome = Outcome("failed", f"internal error: {exc!r}")
                executor_for_launch(launch).stop([launch])
            if outcome.status == "bad_input":
                # Refused in preflight: nothing ran, so nothing is kept.
                DROPPED.take(run.run_id)
                self.store.delete(run.run_id)
                discard()
                run._finish("bad_input", self._with_data_root(outcome.error or "", spec), None)
                return
            dropped, monitoring = DROPPED.take(run.run_id), run._monitor.summary()
            record = finished_record(record, outcome, dropped, monitoring)
            if self.judge:
                record = references.judge(record, spec, self.store)
            # result.json first, the store last: once the store says the run ended, its
            # result.json is there and whole (a controller killed between the two leaves the
            # row 'running', which the next controller marks interrupted).
            write_result_json(record, launch.run_dir)
            self.store.add(record)
            run._finish(outcome.status, outcome.error, record)
        except Exception as exc:  # a store that stays locked: say so, go on
            _LOG.exception("internal error")
            if not run.done:
                run._finish("failed", f"internal error: {exc!r}", None)
        finally:
            ended(run)

    def _with_data_root(self, error: str, spec: catalog.RunSpec) -> str:
        """The preflight's staging hint (playbooks/module_utils/fleetperf_host.py), given the
        data root this run looks in where it is this controller's and not the one
        ``fleetperf prepare`` takes by default, so following it stages the data there."""
        hint = f"fleetperf prepare {spec.case.name} --synthetic"
        default = self.data_root.resolve() == default_data_root().resolve()
        if hint in error and str(self.data_root) in error and not default:
            return error.replace(hint, f"{hint} --data-root {self.data_root}")
        return error

    # -- for the front ends: the inventory and its hosts, the results store, cleanup ----
    # The app (from its thread workers), --batch and the command line come here rather
    # than to the inventory, the store or an executor themselves.

    def read_inventory(self) -> Inventory:
        """(Re)read the inventory file; plans and the host methods below use what it says."""
        self._inventory = load_inventory(self.inventory)
        return self._inventory

    @property
    def inventory_read(self) -> bool:
        return self._inventory is not None

    def host_groups(self) -> dict[str, list[str]]:
        """Every group of the inventory that has hosts, vendor groups first."""
        return hostcheck.groups(self._inventory or self.read_inventory())

    def hosts(self) -> list[str]:
        """Every host of the inventory, in group order."""
        return hostcheck.all_hosts(self._inventory or self.read_inventory())

    def hosts_for(self, spec: catalog.RunSpec) -> list[str]:
        """The hosts a run of ``spec`` would get (InventoryError when none fit)."""
        return select_hosts(self._inventory or self.read_inventory(), spec)

    def preflight(self, hosts: list[str]) -> dict[str, hostcheck.HostCheck]:
        return hostcheck.preflight(self._inventory or self.read_inventory(), hosts)

    def provision(
        self,
        hosts: list[str],
        check: bool,
        on_task: Callable[[hostcheck.TaskEvent], None],
        cancel: Callable[[], bool] = lambda: False,
    ) -> dict[str, dict[str, int]]:
        """provision.yml on ``hosts`` (``check``: --check --diff); per-host stats."""
        return hostcheck.provision(self.inventory, hosts, check, on_task, cancel)

    def has_store(self) -> bool:
        """Whether there is a results store yet (reading one never makes one)."""
        file = paths.store_file(self.store_at)  # a database server: always there
        return self._store is not None or file is None or file.is_file()

    def open_store(self, create: bool = True) -> list[RunRecord]:
        """Open the results store, made where there is none if ``create`` (else
        UsageError); the runs a controller on this machine left running when it died,
        marked interrupted now (none when it was open already)."""
        with self._store_lock:
            if self._store is not None:
                return []
            file = paths.store_file(self.store_at)
            if not create and file is not None and not file.is_file():
                raise UsageError(f"no results store at {file} (run a case first)")
            from tui.results.store import ResultStore  # its database libraries: loaded now

            self._store = ResultStore(self.store_at)
            return mark_interrupted(self._store)

    @property
    def store(self) -> ResultStore:
        if self._store is None:
            self.open_store()
        assert self._store is not None
        return self._store

    def runs(self, case: str | None = None, status: str | None = None) -> list[RunRecord]:
        """The stored runs, oldest first."""
        return self.store.list(case=case, status=status)

    def running_elsewhere(self) -> list[RunRecord]:
        """The runs the store has as running under another controller, one this controller
        cannot prove gone (tui/core/liveness.py), oldest first: the runs ``follow`` takes.
        None where there is no store yet (asking never makes one)."""
        if not self.has_store():
            return []
        mine = controller_id()
        return [
            record
            for record in self.store.list(status="running")
            if record.controller != mine
            and not liveness.proven_dead(liveness.parse(record.controller))
        ]

    def follow(self, run_id: str, poll_s: float = FOLLOW_POLL_S) -> FollowedRun:
        """Follow a run another controller runs, read-only, from its run directory
        (``<results>/runs/<run_id>``); UsageError (one line) for a run that is not
        running there, or that is this controller's own."""
        record = self.store.get(run_id)
        if record is None or record.status != "running":
            raise UsageError(f"run {run_id}: not running in {self.store.where}")
        check_run_id(run_id, self.store.where)
        if record.controller == controller_id():
            raise UsageError(f"run {run_id}: this controller runs it; nothing to follow")
        handle = FollowedRun(self.store, self.results_dir, record, poll_s)
        handle._thread.start()
        return handle

    def find_run(self, text: str) -> RunRecord:
        """The run ``text`` names: its whole id, a unique prefix, or the short form tables
        show (UsageError, one line, when none or several)."""
        record = self.store.get(self.store.resolve(text))
        if record is None:  # pruned by another controller since
            raise UsageError(f"no run {text!r} in {self.store.where}")
        return record

    def prune(self, records: list[RunRecord]) -> Iterator[tuple[RunRecord, bool]]:
        """Remove each run's directory, then its row (if the directory cannot go, the row
        stays); a running run is kept (False). The directory is always
        ``<results>/runs/<run_id>``, never the path the record holds (a copied results
        directory's records name the original's); every id is checked before anything goes."""
        runs = Path(os.path.abspath(self.results_dir)) / "runs"  # links in the path kept
        if runs.is_symlink():
            raise UsageError(f"{runs}: a link; --prune removes run directories only in place")
        for record in records:
            check_run_id(record.run_id, self.store.where)
        for record in records:
            if record.status == "running":
                yield record, False
                continue
            run_dir = runs / record.run_id
            if run_dir.is_symlink():  # removed as a link, never followed
                run_dir.unlink()
            elif run_dir.exists():
                shutil.rmtree(run_dir)
            self.store.delete(record.run_id)
            yield record, True

    def cleanup(self) -> Iterator[Cleaned]:
        """Stop what each interrupted run of this machine's, not cleaned yet, left on its
        hosts (its executor's cleanup, on this session's inventory: the operator's, never
        the one a record names), one at a time; the run is marked cleaned once every one
        of its hosts was reached and stopped. Another machine's runs are listed, not
        touched: a record is data, and only the machine that ran a run knows its hosts."""
        if not self.inventory.is_file():
            raise InventoryError(f"inventory {self.inventory}: no such file")
        self.open_store(create=False)
        for record in self.runs(status="interrupted"):
            if record.cleaned:
                continue
            if not liveness.same_machine(liveness.parse(record.controller)):
                yield Cleaned(
                    record, "held", f"held by {owner_text(record.controller)}, not touched"
                )
                continue
            try:
                cleanup = executor_for(record.executor or DEFAULT_KIND).cleanup
                hosts = cleanup(
                    record.run_id, record.hosts, self.inventory, self.results_dir, self.data_root
                )
            except UsageError as exc:  # a run directory or executor that is not this one's
                yield Cleaned(record, "failed", f"not cleaned: {exc}")
                continue
            if all(outcome == STOPPED for outcome in hosts.values()):
                self.store.add(record.model_copy(update={"cleaned": True}))
                yield Cleaned(record, "cleaned", f"stopped on {', '.join(hosts) or 'no host'}")
                continue
            said = "; ".join(f"{host} {outcome}" for host, outcome in hosts.items())
            log = self.results_dir / "runs" / record.run_id / "ansible-cleanup"
            yield Cleaned(record, "failed", f"not cleaned: {said} (see {log})")


@dataclass(frozen=True)
class Cleaned:
    """What ``Session.cleanup`` did with one interrupted run: ``cleaned`` (every host
    stopped), ``held`` (another machine's: not touched) or ``failed``; ``said``: what."""

    record: RunRecord
    outcome: Literal["cleaned", "held", "failed"]
    said: str

    def line(self) -> str:
        """The operator's line: ``cleaned ID: ...``, ``run ID: held by ...`` (stdout), or
        ``fleetperf: run ID: not cleaned: ...`` (stderr)."""
        if self.outcome == "cleaned":
            return f"cleaned {self.record.run_id}: {self.said}"
        prefix = "fleetperf: " if self.outcome == "failed" else ""
        return f"{prefix}run {self.record.run_id}: {self.said}"


def check_run_id(run_id: str, where: str) -> None:
    """UsageError unless ``run_id`` is one (a prune removes the directory it names)."""
    if not is_run_id(run_id):
        raise UsageError(f"{where}: run_id {run_id!r} is not a run id (letters, digits, . _ -)")
