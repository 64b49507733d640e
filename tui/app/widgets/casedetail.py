"""What the Cases screen (tui/app/screens/cases.py) shows beside its tree: a case's and a
suite's facts, the resolved hyperparameters, a family's and the suites' tables, the runs a
suite starts and the --batch command line that starts the same ones."""

from __future__ import annotations

import shlex

from rich import box
from rich.table import Table

from tui.app.safe import literal
from tui.catalog import catalog
from tui.catalog.suites import Suite

Pick = tuple[str, str]  # (case, vendor/CHIPxNxP)
# The families the tree groups cases by (case.yaml's kind), in this order; any other last.
FAMILIES = ("training", "inference", "serving", "base")


def batch_command(
    suite: Suite, chips: list[str], overrides: list[str], repeat: str, smoke: bool
) -> str:
    """The --batch command line that starts the runs Run suite starts."""
    words = ["fleetperf", "--batch", "--suite", suite.name]
    for chip in chips:
        words += ["--config", chip]
    for item in overrides:
        words += ["--set", item]
    if repeat != "1":
        words += ["--repeat", repeat]
    if smoke:
        words.append("--smoke")
    return shlex.join(words)


def case_info(spec: catalog.RunSpec) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    case, config = spec.case, spec.config
    for key, value in (
        ("Case", case.name),
        ("Model", case.model),
        ("Dataset", case.dataset),
        ("Task", case.task if case.kind in case.task else f"{case.task} ({case.kind})"),
        ("Target", target_text(spec)),
        ("Config", f"{config.ref}: {config.nnodes} node(s) x {config.nproc_per_node} proc"),
    ):
        table.add_row(key, literal(value))
    return table


def target_text(spec: catalog.RunSpec) -> str:
    """The target this run is judged by: the case's, as the config and overrides set it
    (hp target_<metric>, the workload's own resolution); none for a smoke run."""
    if spec.case.target is None:
        return "none"
    if spec.smoke:
        return "none (smoke: not judged)"
    return f"{spec.case.target.metric} >= {spec.case.target_value(spec.hp):g}"


def capped_note(spec: catalog.RunSpec, sets: dict) -> str:
    """A warning when an override caps a judged run: it fails short of its target."""
    if spec.smoke or spec.case.target is None or not sets.get("max_samples"):
        return ""
    return f"A capped run is still judged ({target_text(spec)}); Smoke (m) is the short check"


def _titled(title: str) -> Table:
    return Table(title=title, title_justify="left", expand=True, box=box.SIMPLE_HEAD)


def resolved_table(spec: catalog.RunSpec, sets: dict) -> Table:
    table = _titled("Resolved hyperparameters (* = overridden)")
    table.add_column("key")
    table.add_column("value")
    table.add_column("from")
    smoke = catalog.smoke_hp(spec.case, spec.smoke)
    for key, value in spec.hp.items():
        if key in sets:
            where, style = "override *", "bold yellow"
        elif key in smoke:
            where, style = "smoke *", "bold green"
        elif key in spec.config.overrides:
            where, style = "config *", "bold cyan"
        else:
            where, style = "default", ""
        table.add_row(literal(key), literal(repr(value)), where, style=style)
    return table


def family_order(family: str) -> tuple[int, str]:
    return (FAMILIES.index(family) if family in FAMILIES else len(FAMILIES), family)


def family_table(family: str, cases: list[str]) -> Table:
    table = _titled(f"{family}: {len(cases)} case(s); enter opens one")
    table.add_column("case")
    for name in cases:
        table.add_row(literal(name))
    return table


def suites_table(suites: list[Suite]) -> Table:
    table = _titled("Suites (docs/suites.md): fleetperf --batch --suite NAME")
    table.add_column("suite")
    table.add_column("runs", justify="right")
    table.add_column("description")
    for suite in suites:
        table.add_row(literal(suite.name), str(len(suite.pairs)), literal(suite.description))
    return table


def suite_info(suite: Suite, chips: list[str], n_runs: int) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    all_chips = ", ".join(suite.chips)
    if chips:
        shown = f"{len(chips)} of {len(suite.chips)} marked: {', '.join(chips)}"
    else:
        shown = f"none marked: all {len(suite.chips)} ({all_chips})"
    for key, value in (
        ("Suite", suite.name),
        ("About", suite.description or "-"),
        ("Chips", shown),
        ("Runs", f"{n_runs} of {len(suite.pairs)}"),
    ):
        table.add_row(key, literal(value))
    return table


def runs_table(runs: list[Pick]) -> Table:
    table = Table(title="The runs Run suite (s) starts", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("case")
    table.add_column("config")
    for case_name, ref in runs:
        table.add_row(literal(case_name), literal(ref))
    return table
