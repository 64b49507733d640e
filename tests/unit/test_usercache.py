"""The controller's cache between runs (tui/core/usercache.py): private entries, a damaged
one read as a miss, and no more than KEEP of a kind kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui.core import usercache


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "fleetperf"


def test_entries_are_private_and_a_damaged_one_is_a_miss(cache: Path) -> None:
    usercache.write("thing", "k1", {"a": [1]})
    assert usercache.read("thing", "k1") == {"a": [1]}
    assert (cache / "thing-k1.json").stat().st_mode & 0o777 == 0o600
    assert cache.stat().st_mode & 0o777 == 0o700
    (cache / "thing-k1.json").write_text('{"a": ')
    assert usercache.read("thing", "k1") is None
    assert usercache.read("thing", "absent") is None


def test_a_write_keeps_only_the_newest_entries_of_its_kind(cache: Path) -> None:
    for n in range(usercache.KEEP + 3):
        usercache.write("thing", f"k{n}", n)
        # Written in order, seconds apart as far as the clock is concerned.
        os.utime(cache / f"thing-k{n}.json", ns=(n * 10**9, n * 10**9))
    usercache.write("other", "k0", 0)
    usercache.prune("thing")
    kept = sorted(p.name for p in cache.glob("thing-*.json"))
    assert kept == sorted(f"thing-k{n}.json" for n in range(3, usercache.KEEP + 3))
    assert usercache.read("other", "k0") == 0  # another kind's entries are left alone
