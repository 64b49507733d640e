"""An OpenAI-compatible server the operator already runs, named in the workload's environment.

The inventory sets it per host in ``fleetperf_workload_env`` (docs/cases/serving.md, "An
existing endpoint"):

    FLEETPERF_SERVING_ENDPOINT   http(s)://HOST:PORT[/PREFIX][/v1]: the server's base URL
    FLEETPERF_SERVING_MODEL      the model to ask for (default: the first /v1/models lists)
    FLEETPERF_SERVING_TOKEN_ENV  the name of the variable holding the token (optional)

The token is sent as ``Authorization: Bearer`` and is never written anywhere: this module
holds it only in the request headers. The values come from an inventory, so they are checked
(untrusted): a URL that is not plain http(s), or carries a password, query or fragment, a
token variable that is unset, and an endpoint that does not answer /v1/models are each one
line naming the variable and the host. Standard library only.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

import harness

URL_VAR = "FLEETPERF_SERVING_ENDPOINT"
MODEL_VAR = "FLEETPERF_SERVING_MODEL"
TOKEN_VAR = "FLEETPERF_SERVING_TOKEN_ENV"
WHERE = "fleetperf_workload_env"  # the host var that carries them
CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Endpoint:
    url: str  # the base: requests go to {url}/v1/completions
    model: str | None
    token: str | None = field(default=None, repr=False)


def _bad(var: str, why: str) -> harness.InputError:
    return harness.InputError(f"{WHERE}.{var} on host {socket.gethostname()}: {why}")


def configured(environ: Mapping[str, str] = os.environ) -> Endpoint | None:
    """The endpoint the environment names, or None (the workload starts its own server);
    InputError for a value that is not usable."""
    raw = environ.get(URL_VAR, "").strip()
    if not raw:
        return None
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(URL_VAR, f"{raw!r} is not an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise _bad(URL_VAR, f"a URL with credentials; name the token's variable in {TOKEN_VAR}")
    if parts.query or parts.fragment:
        raise _bad(URL_VAR, f"{raw!r}: a base URL takes no query or fragment")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError:
        raise _bad(URL_VAR, f"{raw!r}: the port is not a number from 0 to 65535") from None
    path = parts.path.rstrip("/").removesuffix("/v1")
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    token = None
    if name := environ.get(TOKEN_VAR, "").strip():
        token = environ.get(name) or None
        if token is None:
            raise _bad(TOKEN_VAR, f"names {name}, which is not set in the workload's environment")
    return Endpoint(base, environ.get(MODEL_VAR, "").strip() or None, token)


def headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def auth_headers(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The Authorization header for the configured endpoint's token; none without one."""
    found = configured(environ)
    return headers(found.token if found else None)


def check(endpoint: Endpoint) -> str:
    """GET /v1/models with the token: the model to ask for (the named one, which must be
    listed, or the first); InputError when the endpoint does not answer or refuses."""
    request = urllib.request.Request(f"{endpoint.url}/v1/models", headers=headers(endpoint.token))
    try:
        with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_S) as answer:
            listed = [m["id"] for m in json.loads(answer.read(1 << 20))["data"]]
    except urllib.error.HTTPError as e:
        why = "refused the token" if e.code in (401, 403) else "answered"
        raise _bad(URL_VAR, f"{endpoint.url}/v1/models {why}: HTTP {e.code}") from None
    except (OSError, urllib.error.URLError) as e:
        reason = getattr(e, "reason", e)
        raise _bad(URL_VAR, f"{endpoint.url} is not reachable: {reason}") from None
    except (ValueError, KeyError, TypeError):
        raise _bad(URL_VAR, f"{endpoint.url}/v1/models is not an OpenAI model list") from None
    if endpoint.model is None:
        if not listed:
            raise _bad(URL_VAR, f"{endpoint.url}/v1/models lists no model")
        return str(listed[0])
    if endpoint.model not in listed:
        raise _bad(MODEL_VAR, f"{endpoint.model!r} is not served at {endpoint.url}: {listed}")
    return endpoint.model
