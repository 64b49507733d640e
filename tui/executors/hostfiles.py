"""The files a run leaves in a host's run directory that the controller keeps: which, how
much of each (HOST_FILE_LIMITS), copied from hosts that share the controller's files or
unpacked from the archive the others send (playbooks/tasks/collect.yml)."""

from __future__ import annotations

import os
import re
import stat
import tarfile
from pathlib import Path
from typing import Any, BinaryIO

from tui.core import safefile
from tui.core.errors import UsageError
from tui.core.paths import UnsafeName, host_path

_MIB = 1 << 20
# The most of each host file the controller keeps, and which end (issue 26 point 4: one
# host's 400 MB events file without a newline cost the controller 800 MB of memory and
# was copied whole into results/runs). The events keep their head: the follower's byte
# count still points into the copy, so recover() goes on where it stopped. The logs keep
# their tail, where the error that ended a run is. The settings (environment variables,
# MiB) change the defaults: name -> (setting, default bytes, the end kept).
HOST_FILE_LIMITS: dict[str, tuple[str | None, int, str]] = {
    "events.jsonl": ("FLEETPERF_MAX_EVENTS_MIB", 256 * _MIB, "head"),
    "stdout.log": ("FLEETPERF_MAX_LOG_MIB", 64 * _MIB, "tail"),
    "stderr.log": ("FLEETPERF_MAX_LOG_MIB", 64 * _MIB, "tail"),
    "exit_code": (None, 64, "head"),
    "config.json": (None, _MIB, "head"),
}
HOST_FILES = tuple(HOST_FILE_LIMITS)
MAX_SETTING_MIB = 1 << 16  # 64 GiB: past it, a setting is a typo
# The pax header of a member a host cut to its limit: the file's whole size
# (playbooks/module_utils/fleetperf_host.py CUT_HEADER).
CUT_HEADER = "FLEETPERF.size"
HOST_ARCHIVE = "files.tar"  # what a host's files are fetched in (playbooks/tasks/collect.yml)


def host_file_limits() -> dict[str, dict[str, Any]]:
    """HOST_FILE_LIMITS with the settings applied: name -> {"bytes", "keep"}, as the
    collect modules take them (fleetperf_host_file_limits); UsageError for a bad setting."""
    out = {}
    for name, (setting, default, keep) in HOST_FILE_LIMITS.items():
        raw = os.environ.get(setting) if setting else None
        if raw is not None and not (
            re.fullmatch(r"[0-9]{1,6}", raw) and 0 < int(raw) <= MAX_SETTING_MIB
        ):
            raise UsageError(
                f"{setting}={raw!r}: expected a whole number of MiB, 1 to {MAX_SETTING_MIB}"
            )
        out[name] = {"bytes": default if raw is None else int(raw) * _MIB, "keep": keep}
    return out


def copy_host_files(host_dirs: dict[str, Path], fetch_dir: Path) -> list[str]:
    """What the play's fetch does for other hosts, for hosts that share our files: regular
    files only, never through a link (the workload writes its run dir;
    playbooks/module_utils/fleetperf_host.py does the same on hosts), each within its
    limit. The files cut, as notes."""
    limits, notes = host_file_limits(), []
    for host, src in host_dirs.items():
        dest = fetch_dir / host
        safefile.make_dirs(dest)
        for name in HOST_FILES:
            try:  # O_NONBLOCK: a FIFO opens at once, and is then left out as not regular
                fd = os.open(src / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:  # missing, or a link (ELOOP)
                continue
            with open(fd, "rb") as f:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode):
                    with safefile.replacing(dest / name) as out:
                        kept = _copy_limited(f, out, st.st_size, limits[name])
                    notes += _cut_note(host, name, st.st_size, kept, limits[name])
    return notes


def unpack_host_files(fetch_dir: Path, *, nodes: bool = False) -> list[str]:
    """Each host's fetched HOST_ARCHIVE unpacked, then removed: regular files named in
    HOST_FILES only (the host made it from its run dir, which its workload writes), 0600
    whatever mode the host gave them, replacing a link rather than following. A process
    host's go beside it; with ``nodes``, a Slurm login host's NODE/NAME members go to
    fetch_dir/NODE (playbooks/tasks/slurm_stop.yml). Each within its limit, whatever the
    host sent. What was refused or cut (here or by the host), as notes."""
    refused: dict[str, str] = {}
    limits, cut = host_file_limits(), []
    for archive in fetch_dir.glob(f"*/{HOST_ARCHIVE}"):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                dest = _member_dest(fetch_dir, archive.parent, member.name, nodes, refused)
                if dest and member.isreg() and (f := tar.extractfile(member)) is not None:
                    limit = limits[dest.name]
                    with f, safefile.replacing(dest) as out:
                        kept = _copy_limited(f, out, member.size, limit)
                    size = _whole_size(member)
                    cut += _cut_note(dest.parent.name, dest.name, size, kept, limit)
        archive.unlink()
    return [*refused.values(), *cut]


def _copy_limited(src: BinaryIO, out: BinaryIO, size: int, limit: dict[str, Any]) -> int:
    """Of ``src`` (``size`` bytes), the head or tail its limit keeps, into ``out``, a MiB
    at a time; the bytes copied."""
    kept = min(size, limit["bytes"])
    src.seek(size - kept if limit["keep"] == "tail" else 0)
    left = kept
    while left and (chunk := src.read(min(left, _MIB))):
        out.write(chunk)
        left -= len(chunk)
    return kept - left


def _whole_size(member: tarfile.TarInfo) -> int:
    """A member's size before its host cut it (its CUT_HEADER, if a plausible number)."""
    said = member.pax_headers.get(CUT_HEADER, "")
    if re.fullmatch(r"[0-9]{1,19}", said) and int(said) > member.size:
        return int(said)
    return member.size


def _cut_note(host: str, name: str, size: int, kept: int, limit: dict[str, Any]) -> list[str]:
    """The record's note for a host file cut (``size`` bytes, ``kept`` of them) to its
    limit, here or by its host; none for one kept whole."""
    if kept >= size:
        return []
    setting = HOST_FILE_LIMITS[name][0]
    why = f" ({setting})" if setting else ""
    return [
        f"host {host}: {name} was {size} bytes; kept its {limit['keep']} {kept} bytes, the"
        f" limit{why}"
    ]


def _member_dest(
    fetch_dir: Path, host_dir: Path, name: str, nodes: bool, refused: dict[str, str]
) -> Path | None:
    """Where a member of a host's archive goes, if anywhere: HOST/NAME, or with ``nodes``
    NODE/NAME, the node's name from the host through paths.host_path (a refusal noted in
    ``refused``, once a name)."""
    node, _, file = name.rpartition("/")
    if file not in HOST_FILES or bool(node) != nodes:
        return None
    if not nodes:
        return host_dir / file
    try:
        node_dir = host_path(fetch_dir, node)
    except UnsafeName as exc:
        refused.setdefault(ascii(node)[:80], f"host {host_dir.name}: Slurm node {exc}")
        return None
    safefile.make_dirs(node_dir)
    return node_dir / file
