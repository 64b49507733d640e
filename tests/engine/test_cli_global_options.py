"""Options before a subcommand (issue 41 point 2): ``fleetperf --results DIR results`` read the
default store, ``--results DIR store import F`` imported into the default directory. Every
global option (-i, --results, --store, --data-root) before every subcommand is now that
subcommand's own, or refused with one line: never ignored."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from seed_records import seed001_records

from tui import cli
from tui.results.store import ResultStore

# Each (sub)subcommand with the arguments it requires.
LEAVES = {
    ("cases",): [],
    ("prepare",): ["distilbert-pytorch"],
    ("results",): [],
    ("report",): ["-o", "r.html"],
    ("store", "export"): [],
    ("store", "import"): ["F"],
    ("cleanup",): [],
    ("new-case",): ["x"],
    ("peak",): [],
    ("serve",): [],
    ("fleet", "up"): ["2"],
    ("fleet", "down"): [],
    ("fleet", "degrade"): ["node1"],
    ("fleet", "restore"): ["node1"],
    ("provision",): [],
    ("qualify",): [],
    ("images", "tag"): ["cpu"],
    ("images", "context"): ["cpu", "d"],
    ("images", "build"): ["cpu"],
}
GIVEN = {"inventory": "/tmp/g/inv.yml", "results": "/tmp/g/res", "store": "/tmp/g/s.sqlite"}
GIVEN["data_root"] = "/tmp/g/data"


def _leaves(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    nested = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        return [path]
    return [leaf for name, q in nested[0].choices.items() for leaf in _leaves(q, (*path, name))]


def _parse(argv: list[str]) -> tuple[argparse.Namespace | None, str]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return cli.parse_args(argv), ""
    except SystemExit as exc:
        assert exc.code == 2
        return None, err.getvalue()


def _seen(args: argparse.Namespace, dest: str) -> object:
    """What the subcommand will use for the option."""
    if dest == "results":
        return cli._results_dir(args)
    if dest == "data_root":
        return args.data_root
    if dest == "store":
        return cli._stores(args)
    return args.inventory


def _expected(dest: str) -> object:
    value = GIVEN[dest]
    return {"results": Path(value).resolve(), "store": [value]}.get(dest, Path(value))


def test_the_table_names_every_subcommand() -> None:
    assert sorted(_leaves(cli.parser())) == sorted(LEAVES)


@pytest.mark.parametrize("leaf", sorted(LEAVES), ids=" ".join)
@pytest.mark.parametrize(("flag", "dest"), [(f[-1], d) for f, d, *_ in cli.GLOBAL_OPTIONS])
def test_a_global_option_before_a_subcommand_is_used_or_refused(
    leaf: tuple[str, ...], flag: str, dest: str
) -> None:
    argv = [flag, GIVEN[dest], *leaf, *LEAVES[leaf]]
    args, said = _parse(argv)
    if args is None:  # refused: one line naming the option and the subcommand
        last = said.strip().splitlines()[-1]
        assert (
            last
            == f"fleetperf: error: {flag} before {leaf[0]}: fleetperf {leaf[0]} takes no"
            + (f" {flag} (fleetperf {leaf[0]} --help)")
        )
        return
    assert _seen(args, dest) == _expected(dest), argv
    # The same after the subcommand's name reads the same; another value there is refused.
    after, _ = _parse([*leaf, *LEAVES[leaf], flag, GIVEN[dest]])
    assert after is not None and _seen(after, dest) == _expected(dest)
    twice, said = _parse([*argv, flag, "/tmp/other"])
    assert twice is None and "given before and after" in said


def test_the_subcommands_that_take_them_do() -> None:
    """The ones an operator reaches for; a refusal there would be a regression."""
    takes = {
        ("results",): ("results", "store"),
        ("report",): ("results", "store"),
        ("store", "import"): ("results", "store"),
        ("store", "export"): ("results", "store"),
        ("cleanup",): ("results", "store", "data_root"),
        ("serve",): ("inventory", "results", "data_root"),
        ("prepare",): ("data_root",),
        ("peak",): ("data_root",),
        ("provision",): ("inventory",),
    }
    for leaf, dests in takes.items():
        for dest in dests:
            flag = next(f[-1] for f, d, *_ in cli.GLOBAL_OPTIONS if d == dest)
            args, said = _parse([flag, GIVEN[dest], *leaf, *LEAVES[leaf]])
            assert args is not None, said
            assert _seen(args, dest) == _expected(dest)


@pytest.mark.parametrize("option", ["--case", "--format", "--batch"])
def test_batch_options_before_a_subcommand_are_refused(option: str) -> None:
    value = {"--case": ["x"], "--format": ["json"], "--batch": []}[option]
    args, said = _parse([option, *value, "results"])
    assert args is None and said.strip().splitlines()[-1].startswith(f"fleetperf: error: {option}")


def _fleetperf(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_results_store_import_and_report_read_the_directory_given_before(tmp_path: Path) -> None:
    """What the operator tried: each answered from the default store before."""
    full = tmp_path / "full"
    with ResultStore(full / "fleetperf.sqlite") as store:
        for record in seed001_records():
            store.add(record)
    listed = _fleetperf("--results", str(full), "results", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == ["r1", "r2", "r3", "r4"]

    export = tmp_path / "export.jsonl"
    out = _fleetperf("--results", str(full), "store", "export", "-o", str(export))
    assert out.returncode == 0 and "(4 run(s)" in out.stdout, out.stdout + out.stderr
    empty = tmp_path / "empty"
    out = _fleetperf("--results", str(empty), "store", "import", str(export))
    assert out.returncode == 0, out.stderr
    assert f"imported 4 run(s) into {empty / 'fleetperf.sqlite'}" in out.stdout

    page = tmp_path / "r.html"
    out = _fleetperf("--results", str(empty), "report", "-o", str(page))
    assert out.returncode == 0 and "(4 run(s))" in out.stdout, out.stdout + out.stderr
