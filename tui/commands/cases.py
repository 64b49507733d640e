"""``fleetperf cases``: every case with its configs and smoke timing, then the suites."""

from __future__ import annotations

import argparse

from tui.catalog import catalog, suites
from tui.commands.common import Subcommand
from tui.core.errors import CatalogError


def cmd_cases() -> int:
    for name in catalog.case_names():
        case = catalog.load_case(name)
        print(f"{name}  ({case.model}, {case.dataset}, {case.kind})")
        print(f"    {smoke_text(case)}")
        for ref in catalog.config_refs(case):
            print(f"    {ref}")
    print("\nsuites (--batch --suite NAME, --config VENDOR[/CHIP] picks a chip; docs/suites.md)")
    for name in suites.suite_names():
        try:
            suite = suites.load_suite(name)
        except CatalogError as exc:  # e.g. FLEETPERF_CASES_DIR names other cases: still list
            print(f"{name}  (not runnable here: {exc})")
            continue
        print(f"{name}  ({suite.description})" if suite.description else name)
        print(f"    {len(suite.pairs)} run(s) on {', '.join(suite.chips)}")
    return 0


def smoke_text(case: catalog.CaseFile) -> str:
    """How long the case's --smoke and full runs took here, as its case.yaml records."""
    if case.smoke is None:
        return "no --smoke run declared"
    took = case.smoke.measured
    if took is None:
        return "--smoke: not timed yet"
    return (
        f"--smoke {_duration(took.smoke_s)}, full run {_duration(took.full_s)} on {took.config}"
        f" (measured on a {took.cores}-CPU host at a load up to {took.load:g})"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _no_arguments(_: argparse.ArgumentParser) -> None:
    pass


COMMAND = Subcommand(
    "cases", "list cases and their configs, and suites", _no_arguments, lambda _: cmd_cases()
)
