"""Every file the controller writes, and the files it reads from run directories others
may write (``open_regular``): created where no name exists yet (never through a link
planted at a predictable name), with an exact mode whatever the umask, and replaced whole.

``replacing`` writes a random temporary name beside the target (``O_CREAT|O_EXCL|
O_NOFOLLOW``), fsyncs it, renames it over the target (a link there is replaced, never written
through) and fsyncs the directory. Files are 0600 and directories 0700 unless a caller says
otherwise (docs/security.md, "Files the controller writes").
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

PRIVATE = 0o600  # results, store, logs, exports: config env and hp are in them
PRIVATE_DIR = 0o700


def create(path: Path, mode: int = PRIVATE) -> int:
    """A new file at ``path`` opened for writing: FileExistsError if anything is there, a
    dangling link included. The mode is set after creation, so the umask cannot change it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def replacing(path: Path, mode: int = PRIVATE) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` whole when the block ends without an error;
    otherwise ``path`` is left as it was and the temporary file is removed."""
    # Random and short enough for NAME_MAX: nobody can plant a link at it in advance.
    tmp = path.with_name(f".{path.name[:200]}.{secrets.token_hex(8)}.tmp")
    try:
        with os.fdopen(create(tmp, mode), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # whole on disk before the rename makes it the file
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a crash


def write_bytes(path: Path, data: bytes, mode: int = PRIVATE) -> None:
    with replacing(path, mode) as f:
        f.write(data)


def write_text(path: Path, text: str, mode: int = PRIVATE) -> None:
    write_bytes(path, text.encode("utf-8"), mode)


def make_dirs(path: Path, *, exist_ok: bool = True) -> None:
    """``path`` and its missing parents, each created 0700 whatever the umask. A directory
    that exists keeps its mode: loosening or tightening the operator's is their call."""
    if exist_ok and path.is_dir():
        return
    if path.parent != path and not path.parent.is_dir():
        make_dirs(path.parent)
    try:
        os.mkdir(path, PRIVATE_DIR)
    except FileExistsError:
        if exist_ok and path.is_dir():  # made meanwhile, e.g. by another controller
            return
        raise
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, PRIVATE_DIR)
    finally:
        os.close(fd)


def appending(path: Path, mode: int = PRIVATE) -> BinaryIO:
    """``path`` opened to append to (made ``mode`` if new): a link there is never followed,
    and anything but a regular file is refused (OSError), as a log needs."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "ab")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading where it is a regular file in a directory that is not
    a link, as a reader of another controller's run directory needs: neither the file
    nor its directory followed if a link, never blocking (a FIFO planted there would hang
    ``open``), and anything but a regular file refused. OSError otherwise."""
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(path.name, flags, dir_fd=parent)
    finally:
        os.close(parent)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
