"""Command line: the terminal app by default, ``--batch`` headless, and the subcommands."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tui import catalog
from tui.results import FORMATS, ResultStore, render

SUBCOMMANDS = ("cases", "prepare", "results")
DEFAULT_INVENTORY = catalog.REPO_ROOT / "inventory" / "local.yml"


def default_results_dir() -> Path:
    return Path(os.environ.get("FLEETPERF_RESULTS", catalog.REPO_ROOT / "results"))


def default_data_root() -> Path:
    return Path(os.environ.get("FLEETPERF_DATA", catalog.REPO_ROOT / "data"))


def _main_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fleetperf",
        description="Benchmark AI accelerators: launch cases on a fleet, watch them, keep results.",
        epilog="subcommands: fleetperf cases | prepare CASE [--synthetic] | results [RUN_ID]",
    )
    p.add_argument("--batch", action="store_true", help="run headless (no terminal app)")
    p.add_argument("--case", action="append", default=[], help="case to run (repeatable)")
    p.add_argument(
        "--config", action="append", default=[], help="VENDOR/CHIPxNNODESxNPROC (repeatable)"
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a hyperparameter"
    )
    p.add_argument("-i", "--inventory", type=Path, default=None, help="Ansible inventory")
    p.add_argument("--repeat", type=int, default=1, help="run each case N times")
    p.add_argument("--results", type=Path, default=None, help="results directory")
    p.add_argument("--data-root", type=Path, default=None, help="data root for local hosts")
    p.add_argument("--format", choices=FORMATS, default="md", help="final table format")
    return p


def _sub_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleetperf")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("cases", help="list cases and their configs")
    prep = sub.add_parser("prepare", help="stage a case's data and checkpoint")
    prep.add_argument("case")
    prep.add_argument("--synthetic", action="store_true", help="tiny offline data and model")
    prep.add_argument("--data-root", type=Path, default=None)
    res = sub.add_parser("results", help="tables from the results store")
    res.add_argument("run_id", nargs="?")
    res.add_argument("--case", default=None)
    res.add_argument("--format", choices=FORMATS, default="md")
    res.add_argument("--results", type=Path, default=None)
    return p


def cmd_cases() -> int:
    for name in catalog.case_names():
        case = catalog.load_case(name)
        print(f"{name}  ({case.model}, {case.dataset}, {case.kind})")
        for ref in catalog.config_refs(case):
            print(f"    {ref}")
    return 0


def cmd_prepare(case_name: str, synthetic: bool, data_root: Path) -> int:
    case = catalog.load_case(case_name)
    if not case.prepare:
        raise catalog.CatalogError(f"case {case.name}: declares no prepare script")
    argv = [sys.executable, str(case.dir / case.prepare), "--out", str(data_root / case.name)]
    if synthetic:
        argv.append("--synthetic")
    env = {**os.environ, "PYTHONPATH": str(catalog.HARNESS_DIR)}
    return subprocess.run(argv, env=env, check=False).returncode


def cmd_results(run_id: str | None, case: str | None, fmt: str, results_dir: Path) -> int:
    path = results_dir / "fleetperf.sqlite"
    if not path.is_file():
        raise catalog.CatalogError(f"no results store at {path} (run a case first)")
    with ResultStore(path) as store:
        if run_id:
            record = store.get(run_id)
            if record is None:
                raise catalog.CatalogError(f"no run {run_id!r} in {path}")
            records = [record]
        else:
            records = store.list(case=case)
    print(render(records, fmt))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            args = _sub_parser().parse_args(argv)
            if args.command == "cases":
                return cmd_cases()
            if args.command == "prepare":
                return cmd_prepare(args.case, args.synthetic, args.data_root or default_data_root())
            return cmd_results(
                args.run_id, args.case, args.format, args.results or default_results_dir()
            )
        args = _main_parser().parse_args(argv)
        if not args.batch:
            print(
                "fleetperf: the terminal app is not built yet; run headless with"
                " --batch --case CASE --config VENDOR/CHIPxNxP",
                file=sys.stderr,
            )
            return 2
        from tui.batch import BatchArgs, run_batch

        return run_batch(
            BatchArgs(
                cases=args.case,
                configs=args.config,
                sets=args.set,
                inventory=(args.inventory or DEFAULT_INVENTORY).resolve(),
                repeat=args.repeat,
                results_dir=(args.results or default_results_dir()).resolve(),
                data_root=(args.data_root or default_data_root()).resolve(),
                fmt=args.format,
            )
        )
    except catalog.CatalogError as exc:
        print(f"fleetperf: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
