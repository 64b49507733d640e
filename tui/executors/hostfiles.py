"""The files a run leaves in a host's run directory that the controller keeps: which, how
much of each (HOST_FILE_LIMITS), copied from hosts that share the controller's files or
unpacked from the archive the others send (playbooks/tasks/collect.yml)."""

from __future__ import annotations

import base64
import binascii
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
# What one host's archive may make the controller read, whatever the host put in it (issue
# 39 point 6): a plain tar only (tarfile's default mode decompressed 276 bytes of bzip2 into
# a 256 MiB log, 1.35 CPU-s), at most so many members (a Slurm login host's archive holds
# its nodes' HOST_FILES: 5 a node) and so many bytes of headers and data, and no extended
# header (pax, GNU long name) larger than a host's own could be: tarfile reads one whole.
ARCHIVE_MAX_MEMBERS = 1024
ARCHIVE_MAX_BYTES = 4 << 30  # 10 nodes' files at their default limits (385 MiB a node)
ARCHIVE_MAX_HEADER = 64 << 10
_EXTENDED_HEADERS = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


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


def keep_polled_archive(fetch_dir: Path, host: str, encoded: str) -> None:
    """A host's files as its last poll returned them (playbooks/run.yml, base64) where the
    fetch would have put them (fetch_dir/HOST/HOST_ARCHIVE); unpacked as a fetched one.
    One that is not base64 is left out: the run's files are then missing, not garbled."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        return
    safefile.make_dirs(fetch_dir / host)
    safefile.write_bytes(fetch_dir / host / HOST_ARCHIVE, data)


def unpack_host_files(fetch_dir: Path, *, nodes: bool = False) -> list[str]:
    """Each host's fetched HOST_ARCHIVE unpacked, then removed: regular files named in
    HOST_FILES only (the host made it from its run dir, which its workload writes), 0600
    whatever mode the host gave them, replacing a link rather than following. A process
    host's go beside it; with ``nodes``, a Slurm login host's NODE/NAME members go to
    fetch_dir/NODE (playbooks/tasks/slurm_stop.yml). Each within its limit, whatever the
    host sent; the archive a plain tar within ARCHIVE_MAX_MEMBERS and ARCHIVE_MAX_BYTES.
    What was refused or cut (here or by the host), as notes."""
    refused: dict[str, str] = {}
    limits, cut = host_file_limits(), []
    for archive in fetch_dir.glob(f"*/{HOST_ARCHIVE}"):
        try:
            cut += _unpack(archive, fetch_dir, nodes, limits, refused)
        finally:
            archive.unlink()
    return [*refused.values(), *cut]


class _BoundedHeader(tarfile.TarInfo):
    """A member's header, refused (HeaderError) where it announces an extended header over
    ARCHIVE_MAX_HEADER, before tarfile reads that header into memory."""

    @classmethod
    def frombuf(cls, buf: bytes, encoding: str, errors: str) -> tarfile.TarInfo:
        info = super().frombuf(buf, encoding, errors)
        if info.type in _EXTENDED_HEADERS and info.size > ARCHIVE_MAX_HEADER:
            raise tarfile.HeaderError(f"an extended header of {info.size} bytes")
        return info


def _unpack(
    archive: Path,
    fetch_dir: Path,
    nodes: bool,
    limits: dict[str, dict[str, Any]],
    refused: dict[str, str],
) -> list[str]:
    """One host's archive unpacked as unpack_host_files says; the notes of its files cut,
    and of the archive refused or read only up to a cap."""
    host, notes, read = archive.parent.name, [], 0
    try:
        with tarfile.open(archive, "r:", tarinfo=_BoundedHeader) as tar:
            for member in tar:
                if read == ARCHIVE_MAX_MEMBERS:
                    return [*notes, _archive_note(host, f"more than {read} members")]
                if member.size < 0:
                    raise tarfile.HeaderError(f"a size of {member.size}")
                if member.offset_data + member.size > ARCHIVE_MAX_BYTES:
                    return [*notes, _archive_note(host, f"more than {ARCHIVE_MAX_BYTES} bytes")]
                dest = _member_dest(fetch_dir, archive.parent, member.name, nodes, refused)
                if dest and member.isreg() and (f := tar.extractfile(member)) is not None:
                    limit = limits[dest.name]
                    with f, safefile.replacing(dest) as out:
                        kept = _copy_limited(f, out, member.size, limit)
                    size = _whole_size(member)
                    notes += _cut_note(dest.parent.name, dest.name, size, kept, limit)
                read += 1
    except (tarfile.TarError, ValueError) as exc:  # ValueError: a header's bad text
        why = ascii(str(exc))[1:-1][:80]
        if not read:
            return [*notes, f"host {host}: {HOST_ARCHIVE} is not a plain tar ({why}); none kept"]
        notes.append(
            f"host {host}: {HOST_ARCHIVE} is unreadable at member {read + 1} ({why}); the rest"
            " left out"
        )
    return notes


def _archive_note(host: str, what: str) -> str:
    """The record's note for a host's archive read only up to a cap."""
    return f"host {host}: {HOST_ARCHIVE} holds {what}; the rest left out, the limit"


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
