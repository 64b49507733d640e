"""Nothing secret is kept (issue 6 §5): a run through real ansible-runner with secrets
planted where operators keep them, then every file the run leaves is scanned."""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host


def _vault(value: str, password_file: Path, name: str) -> str:
    """``name: !vault |`` YAML for value, encrypted by the real ansible-vault."""
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-vault"),
            "encrypt_string",
            "--vault-password-file",
            str(password_file),
            "--name",
            name,
            value,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _files(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


@pytest.mark.slow  # a real run through the engine, every artifact searched
@pytest.mark.parametrize("way", ["play", "direct"])  # tui/executors/direct.py
def test_no_secret_reaches_artifacts_results_or_output(
    emitter: Fleetperf, tmp_path: Path, way: str
) -> None:
    planted = {
        name: f"{name}-{secrets.token_hex(8)}"
        for name in ("controller-env", "aws-env", "become", "inventory-var", "vault", "vault-pw")
        + ("hashi-vault-role",)
    }
    planted["workload-token"] = f"hf_{secrets.token_hex(8)}"
    password_file = tmp_path / "vault-pass"
    password_file.write_text(planted["vault-pw"] + "\n")
    host = {
        **local_host(emitter, "localhost"),
        "ansible_become_password": planted["become"],
        "fleetperf_api_key": planted["inventory-var"],
        "fleetperf_workload_env": {"HF_TOKEN": planted["workload-token"]},
    }
    lines = ["all:", "  children:", "    cpu:", "      hosts:", "        localhost:"]
    lines += [
        f"          {k}: {v!r}" if isinstance(v, str) else f"          {k}: {v}"
        for k, v in host.items()
    ]
    vaulted = _vault(planted["vault"], password_file, "fleetperf_vaulted")
    lines += ["          " + ln for ln in vaulted.rstrip("\n").splitlines()]
    inventory = tmp_path / "inv.yml"
    inventory.write_text("\n".join(lines) + "\n")

    env = emitter.env() | {
        "FLEETPERF_TEST_SECRET": planted["controller-env"],
        "AWS_SECRET_ACCESS_KEY": planted["aws-env"],
        "ANSIBLE_VAULT_PASSWORD_FILE": str(password_file),
        # A plugin's setting, named like no secret; and a verbosity that would print
        # module arguments (the workload's env) into the stdout artifact.
        "ANSIBLE_HASHI_VAULT_ROLE_ID": planted["hashi-vault-role"],
        "ANSIBLE_VERBOSITY": "3",
        "FLEETPERF_DIRECT": "0" if way == "play" else "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # the inventory listing's cache
    }
    out = subprocess.run(
        emitter.argv(
            *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1", "-i", str(inventory)),
            *("--set", "env_digest=HF_TOKEN"),
        ),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (run_dir,) = (emitter.results / "runs").iterdir()
    kept = _files(emitter.results, tmp_path / "cache")
    # The run really kept ansible-runner's artifacts (the play), its events and the host's
    # files.
    names = {p.name for p in kept}
    assert {"events.jsonl", "result.json", "fleetperf.sqlite"} <= names
    assert ({"command", "stdout"} <= names) == (way == "play")
    assert (run_dir / "hosts" / "localhost" / "stdout.log").is_file()
    # The workload did get its token: only its digest is kept.
    (record,) = emitter.records()
    digest = hashlib.sha256(planted["workload-token"].encode()).hexdigest()
    assert record["notes"] == [f"sha256 of HF_TOKEN: {digest}"]
    # ansible ran at the run's verbosity, not the operator's shell's.
    for command in run_dir.glob("ansible-*/artifacts/*/command"):
        env = json.loads(command.read_text())["env"]
        assert "ANSIBLE_VERBOSITY" not in env and "ANSIBLE_HASHI_VAULT_ROLE_ID" not in env
    for path in kept:
        data = path.read_bytes()
        for what, value in planted.items():
            assert value.encode() not in data, f"{what} secret in {path}"
    for what, value in planted.items():
        assert value not in out.stdout + out.stderr, f"{what} secret in the output"
