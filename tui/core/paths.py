"""Where fleetperf keeps things by default: one place for the cli, the engine and the app."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tui.core.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
# The harness always lives here; FLEETPERF_CASES_DIR points the catalog at other cases.
HARNESS_DIR = REPO_ROOT / "cases"
CASES_DIR = Path(os.environ.get("FLEETPERF_CASES_DIR", HARNESS_DIR)).resolve()
# Named lists of case x config pairs (tui/catalog/suites.py); FLEETPERF_SUITES_DIR: others.
SUITES_DIR = Path(os.environ.get("FLEETPERF_SUITES_DIR", REPO_ROOT / "suites")).resolve()
DEFAULT_INVENTORY = REPO_ROOT / "inventory" / "local.yml"  # this machine, vendor cpu
STORE_FILE = "fleetperf.sqlite"  # the results store, in the results directory


def default_results_dir() -> Path:
    return Path(os.environ.get("FLEETPERF_RESULTS", REPO_ROOT / "results"))


def default_data_root() -> Path:
    return Path(os.environ.get("FLEETPERF_DATA", REPO_ROOT / "data"))


def store_path(results_dir: Path) -> Path:
    return results_dir / STORE_FILE


def settings_store() -> Path:
    """The settings file naming a team's store for every command of this user: its first
    line that is not blank or a # comment (docs/store.md)."""
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "fleetperf" / "store"


def default_store(results_dir: Path) -> str:
    """The store fleetperf uses where --store is not given: FLEETPERF_STORE (a path,
    sqlite:///PATH or postgresql://...), else the settings file's, else the results
    directory's SQLite file."""
    if os.environ.get("FLEETPERF_STORE"):
        return os.environ["FLEETPERF_STORE"]
    settings = settings_store()
    try:
        lines = settings.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise UsageError(f"{settings}: cannot read the store's setting ({why})") from None
    named = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return named[0] if named else str(store_path(results_dir))


def store_file(where: str) -> Path | None:
    """The SQLite file a store location names (a path or sqlite:///PATH, as
    tui/results/storedb.py reads them); None for a database server's URL."""
    if "://" not in where:
        return Path(where)
    if where.startswith("sqlite:///"):
        return Path(where.removeprefix("sqlite:///").partition("?")[0])
    return None


# A name a host gave (a Slurm node's, a file's) that becomes one path component here:
# playbooks/module_utils/fleetperf_slurm.py NODE_NAME, which the login host also applies.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class UnsafeName(ValueError):
    """A name from a host that cannot become a path on the controller."""


def host_path(directory: Path, name: object) -> Path:
    """``directory / name`` for a name that came from a host, the only way the controller
    turns one into a path: one component of HOST_NAME (no separator, no ``..``, no
    leading dot or dash) that resolves to a direct child of ``directory`` (no link there
    leads out). UnsafeName otherwise, naming it."""
    shown = ascii(name)[:80]  # whatever the host sent: one short printable line
    if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
        raise UnsafeName(f"{shown}: not a name (letters, digits, '.', '_', '-'; at most 64)")
    path = directory / name
    if path.resolve().parent != directory.resolve():
        raise UnsafeName(f"{shown}: leads out of {directory}")
    return path
