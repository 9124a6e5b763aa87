"""The dashboard against a hostile network: credentials before parsing, security headers,
a production server, no public bind without credentials, quotes in registry names."""

from __future__ import annotations

import base64
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MLPILOT, free_port, local_env, run_cli, wait_for_port

pytestmark = pytest.mark.integration
USER, PASSWORD = "ana", "s3cret"


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, **local_env(home, **extra)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("dash-security") / "home"
    port = free_port()
    env = _env(home, MLPILOT_DASH_USER=USER, MLPILOT_DASH_PASSWORD=PASSWORD)
    proc = subprocess.Popen(
        [MLPILOT, "dashboard", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _request(
    url: str, *, auth: tuple[str, str] | None = None, body: bytes | None = None
) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()  # case-blind
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def test_a_malformed_callback_gets_401_before_its_body_is_read(server: str) -> None:
    for body in (b"{not json", b'{"output": [1, 2]}', b"\xff\xfe" * 1000):
        status, headers, _ = _request(server + "/_dash-update-component", body=body)
        assert status == 401
        assert headers.get("WWW-Authenticate", "").startswith("Basic")
        status, _, _ = _request(server + "/_dash-update-component", body=body, auth=(USER, "wrong"))
        assert status == 401
    # with credentials, the same bytes are a client error, never a server error
    status, _, _ = _request(
        server + "/_dash-update-component", body=b"{not json", auth=(USER, PASSWORD)
    )
    assert 400 <= status < 500


@pytest.mark.parametrize(
    "header", ["Basic", "Basic !!!", "Basic " + base64.b64encode(b"ana").decode(), "Bearer x"]
)
def test_malformed_credentials_are_refused(server: str, header: str) -> None:
    request = urllib.request.Request(server + "/", headers={"Authorization": header})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401


def test_every_response_carries_the_security_headers(server: str) -> None:
    for path, auth in (("/", (USER, PASSWORD)), ("/_dash-layout", (USER, PASSWORD)), ("/", None)):
        status, headers, _ = _request(server + path, auth=auth)
        assert status == (200 if auth else 401), path
        policy = headers.get("Content-Security-Policy", "")
        assert "script-src 'self' 'sha256-" in policy, policy
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert headers.get("X-Frame-Options") == "DENY"
        assert headers.get("X-Content-Type-Options") == "nosniff"
        # waitress identifies itself as mlpilot; Flask's development server says Werkzeug
        assert headers.get("Server") == "mlpilot", headers.get("Server")


def test_a_public_address_without_credentials_is_refused(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "MLPILOT_HOME": str(tmp_path / "home"),
        "MLPILOT_DASH_USER": "",
        "MLPILOT_DASH_PASSWORD": "",
    }
    done = run_cli("dashboard", "--host", "0.0.0.0", "--port", str(port), env=env, timeout=60)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "MLPILOT_DASH_USER" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_quotes_in_registered_model_names_leave_the_models_page_whole(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from mlpilot.dashboards import queries
    from mlpilot.platform.config import Settings

    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")})
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    names = ["it's", 'say "hi"', "both ' and \"", "plain"]
    for i, name in enumerate(names):
        client.create_registered_model(name)
        for _ in range(i + 1):
            client.create_model_version(name, source=str(tmp_path))
    queries.configure(settings)
    try:
        listed = {m["name"]: m for m in queries.registered_models()}
    finally:
        queries.configure(None)
    assert set(listed) == set(names)
    for i, name in enumerate(names):
        versions = [str(v["version"]) for v in listed[name]["versions"]]
        assert versions == [str(v) for v in range(i + 1, 0, -1)], (name, versions)
