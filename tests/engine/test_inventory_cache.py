"""The inventory listing kept between controllers (tui/engine/inventory.py): read again
while nothing it depends on changed, listed anew when something did, never kept where it
could change by itself or hold what a vault decrypts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_inventory

from tui.engine import inventory


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "fleetperf"


def test_a_listing_is_read_again_until_what_it_reads_changes(tmp_path: Path, cache: Path) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"box1": {"ansible_connection": "local"}})
    first = inventory.load_inventory(inv)
    assert first.group_hosts("cpu") == ["box1"]
    (kept,) = cache.glob("inventory-*.json")
    assert kept.stat().st_mode & 0o777 == 0o600
    # The kept listing is what the next read returns (marked here to tell it from a new one).
    listing = json.loads(kept.read_text())
    listing["hostvars"]["box1"]["marker"] = "kept"
    kept.write_text(json.dumps(listing))
    assert inventory.load_inventory(inv).var("box1", "marker") == "kept"
    # A group_vars file beside the inventory changes the listing: ansible lists it anew.
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "cpu.yml").write_text("fleetperf_devices: 4\n")
    again = inventory.load_inventory(inv)
    assert again.var("box1", "fleetperf_devices") == 4 and again.var("box1", "marker") is None
    assert len(list(cache.glob("inventory-*.json"))) == 2


@pytest.mark.parametrize("kind", ["vault value", "vault file", "plugin", "script"])
def test_what_may_change_by_itself_or_hold_secrets_is_never_kept(
    tmp_path: Path, cache: Path, kind: str
) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"box1": {"ansible_connection": "local"}})
    if kind == "vault value":
        inv.write_text(inv.read_text() + "  vars:\n    token: !vault |\n      $ANSIBLE_VAULT;1.1\n")
    elif kind == "vault file":
        (tmp_path / "group_vars").mkdir()
        (tmp_path / "group_vars" / "all.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n3132\n")
    elif kind == "plugin":
        inv.write_text("plugin: community.general.proxmox\n")
    else:
        inv.chmod(0o755)
    assert inventory._listing_key(inv) is None


def test_a_damaged_listing_is_listed_anew(tmp_path: Path, cache: Path) -> None:
    inv = write_inventory(tmp_path / "inv.yml", {"box1": {"ansible_connection": "local"}})
    inventory.load_inventory(inv)
    (kept,) = cache.glob("inventory-*.json")
    kept.write_text('{"groups": ')  # cut short
    assert inventory.load_inventory(inv).group_hosts("cpu") == ["box1"]
    assert json.loads(kept.read_text())["hostvars"]["box1"]["ansible_connection"] == "local"
