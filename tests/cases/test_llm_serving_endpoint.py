"""llm-serving against an existing endpoint (issue 43): the inventory's fleetperf_workload_env
names an OpenAI-compatible server the operator runs, and the workload starts none and loads
that one, its token sent as ``Authorization: Bearer`` and kept nowhere. The "existing"
server is a real vLLM server this module starts with an API key (vLLM's VLLM_API_KEY: it
then answers 401 to a request without that token). Bad values and an unreachable endpoint
fail in one line naming the variable and the host.

The server test is skipped where .venv-vllm is absent (scripts/bootstrap makes it)."""

from __future__ import annotations

import json
import secrets
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host, write_inventory
from vllm_engine import ENGINE, needs_vllm, prepared

sys.path.insert(0, str(REPO / "cases" / "llm-serving"))
import engine_server  # noqa: E402

TOKEN_VAR = "MY_SERVING_TOKEN"
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llm_serving")]


@pytest.fixture(scope="module")
def fp(tmp_path_factory: pytest.TempPathFactory) -> Fleetperf:
    return prepared(tmp_path_factory, "endpoint", "llm-serving")


@pytest.fixture(scope="module")
def existing(fp: Fleetperf, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A vLLM server that wants a token: (its URL, the token)."""
    token = f"sk-{secrets.token_hex(12)}"
    log = tmp_path_factory.mktemp("existing") / "server.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_API_KEY", token)  # the server's environment, read when it starts
        started = engine_server.serving(
            ENGINE,
            fp.data_root / "llm-serving" / "model",
            dtype="float32",
            max_model_len=256,
            kv_cache_gib=1,
            startup_timeout_s=900,
            log=log,
            say=print,
        )
        server = started.__enter__()
    try:
        yield server.url, token
    finally:
        started.__exit__(None, None, None)


def endpoint_run(
    fp: Fleetperf, tmp: Path, workload_env: dict[str, str], *args: str
) -> tuple[int, str]:
    """A smoke run of llm-serving with ``workload_env`` as the host's fleetperf_workload_env;
    (fleetperf's exit status, its stdout and stderr)."""
    host = {
        **local_host(fp, "localhost"),
        "fleetperf_executor": "process",
        "fleetperf_workload_env": workload_env,
    }
    inventory = write_inventory(tmp / "inventory.yml", {"localhost": host})
    out = fp.batch(
        "llm-serving", "cpu/CPUx1x1", args=("--smoke", "-i", str(inventory), *args), timeout=600
    )
    return out.returncode, out.stdout + out.stderr


@needs_vllm
def test_an_existing_endpoint_is_loaded_with_its_token_and_the_token_is_kept_nowhere(
    fp: Fleetperf, existing: tuple[str, str], tmp_path: Path
) -> None:
    url, token = existing
    env = {
        "FLEETPERF_SERVING_ENDPOINT": f"{url}/v1",
        "FLEETPERF_SERVING_TOKEN_ENV": TOKEN_VAR,
        TOKEN_VAR: token,
    }
    before = set(fp.host_dirs())
    rc, output = endpoint_run(fp, tmp_path, env, "--format", "json")
    assert rc == 0, output[-3000:]
    (run_dir,) = set(fp.host_dirs()) - before
    record = fp.records()[-1]
    assert record["status"] == "passed"
    assert record["metrics"]["completed_requests"] == 8  # through a server wanting the token
    # The notes name the operator's server, not this run's hp for a server it did not start.
    assert any(f"an existing endpoint, {url}, model fleetperf" in n for n in record["notes"])
    stdout = (run_dir / "stdout.log").read_text()
    assert f"existing endpoint {url}, model 'fleetperf': no server started" in stdout
    assert "vLLM server pid" not in stdout and not (run_dir / "server.log").exists()
    # Every file the run left (the store, the run's and the host's files, config.json,
    # events, logs) and fleetperf's output: no token. The inventory is the operator's own.
    kept = [p for p in fp.results.rglob("*") if p.is_file()]
    assert any(p.name == "config.json" for p in kept) and any(p.suffix == ".log" for p in kept)
    for path in kept:
        assert token.encode() not in path.read_bytes(), path
    assert token not in output

    # The same run with another token: the server refuses it, the run fails at the check.
    rc, output = endpoint_run(fp, tmp_path, {**env, TOKEN_VAR: "sk-wrong"})
    assert rc != 0
    assert "FLEETPERF_SERVING_ENDPOINT on host" in output
    assert f"{url}/v1/models refused the token: HTTP 401" in output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"FLEETPERF_SERVING_ENDPOINT": "file:///etc/passwd"},
            "FLEETPERF_SERVING_ENDPOINT on host {host}: 'file:///etc/passwd' is not an "
            "http:// or https:// URL with a host",
        ),
        (
            {"FLEETPERF_SERVING_ENDPOINT": "http://127.0.0.1:{port}/v1"},
            "FLEETPERF_SERVING_ENDPOINT on host {host}: http://127.0.0.1:{port} is not reachable",
        ),
        (
            {"FLEETPERF_SERVING_ENDPOINT": "http://x/v1", "FLEETPERF_SERVING_TOKEN_ENV": "NOPE"},
            "FLEETPERF_SERVING_TOKEN_ENV on host {host}: names NOPE, which is not set",
        ),
    ],
    ids=["not-http", "unreachable", "token-unset"],
)
def test_a_bad_or_unreachable_endpoint_is_one_line_naming_the_variable_and_host(
    fp: Fleetperf, tmp_path: Path, env: dict[str, str], says: str
) -> None:
    port = engine_server.free_port()  # nothing listens there
    env = {k: v.format(port=port) for k, v in env.items()}
    before = set(fp.host_dirs())
    rc, output = endpoint_run(fp, tmp_path, env)
    assert rc != 0
    line = "fleetperf_workload_env." + says.format(host=socket.gethostname(), port=port)
    assert line in output
    assert "Traceback" not in output
    (run_dir,) = set(fp.host_dirs()) - before
    assert "vLLM server pid" not in (run_dir / "stdout.log").read_text()
    errors = [
        json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if '"error"' in x
    ]
    assert any(line in e.get("message", "") for e in errors), errors
