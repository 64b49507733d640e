"""pytest plugin: the test suite leaves this machine's users, groups and /etc as it found them.

At session start (in the xdist controller, or the only process) it takes a snapshot of
/etc: every path with its type, mode, owner and sha256 or link target; at session end it
takes another and, when they differ, fails the session and prints what changed: users
and groups (from passwd, group, shadow and gshadow) by name, other files by path.

Ignored, because they change without any test doing anything: ``IGNORED`` below.
``FLEETPERF_GUARD_ETC`` names another directory to watch instead of /etc (the guard's own
test uses a throwaway one). ``-p no:machine_guard`` turns the guard off.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

# Relative to the watched directory.
IGNORED = {
    # Rewritten by the network set-up of the machine (DHCP client, the sandbox's DNS).
    "resolv.conf",
    # The dynamic linker's cache: rewritten by ldconfig, which package hooks run.
    "ld.so.cache",
    # Clock drift correction, rewritten by hwclock / timesyncd.
    "adjtime",
}
ACCOUNTS = ("passwd", "group", "shadow", "gshadow")

_BEFORE = pytest.StashKey[dict[str, str]]()
_ACCOUNTS = pytest.StashKey[dict[str, dict[str, str]]]()
_CHANGES = pytest.StashKey[list[str]]()


def watched() -> Path:
    return Path(os.environ.get("FLEETPERF_GUARD_ETC", "/etc"))


def snapshot(root: Path) -> dict[str, str]:
    """{relative path: "type mode uid:gid sha256-or-target"} for everything under root."""
    entries: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if rel in IGNORED:
                continue
            st = path.lstat()
            kind = stat.S_IFMT(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                what = "-> " + os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                what = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                what = ""
            entries[rel] = f"{kind:o} {stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid} {what}"
    return entries


def _accounts(root: Path, name: str) -> dict[str, str]:
    """The lines of an account file (passwd, group, ...) by their first field."""
    path = root / name
    if not path.is_file():
        return {}
    lines = path.read_text(errors="replace").splitlines()
    return {line.split(":", 1)[0]: line for line in lines if line and not line.startswith("#")}


def changes(root: Path, before: dict[str, str], accounts: dict[str, dict[str, str]]) -> list[str]:
    """What differs between the snapshot ``before`` and now, one line per change."""
    after = snapshot(root)
    lines = []
    for name in ACCOUNTS:
        old, new = accounts[name], _accounts(root, name)
        lines += [f"{name}: added {k}" for k in sorted(new.keys() - old.keys())]
        lines += [f"{name}: removed {k}" for k in sorted(old.keys() - new.keys())]
        both = sorted(old.keys() & new.keys())
        lines += [f"{name}: changed {k}" for k in both if old[k] != new[k]]
    for rel in sorted(before.keys() | after.keys()):
        if rel not in ACCOUNTS and before.get(rel) != after.get(rel):  # those: by name above
            how = "added" if rel not in before else "removed" if rel not in after else "changed"
            lines.append(f"{root / rel}: {how}")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller guards
        return
    root = watched()
    config.stash[_BEFORE] = snapshot(root)
    config.stash[_ACCOUNTS] = {name: _accounts(root, name) for name in ACCOUNTS}


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if _BEFORE not in config.stash:
        return
    found = changes(watched(), config.stash[_BEFORE], config.stash[_ACCOUNTS])
    config.stash[_CHANGES] = found
    if found:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    found = config.stash.get(_CHANGES, [])
    if found:
        terminalreporter.write_sep("=", "the tests changed this machine", red=True)
        for line in found:
            terminalreporter.write_line(line)
