"""The dashboard against a hostile network: forged Host headers (DNS rebinding), cross-site
posts, missing or forged CSRF tokens, credentials before parsing, security headers, a
production server, no public bind without credentials, quotes in registry names."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
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
ALLOWED = "dash.example.org,.corp.example"
CALLBACK = "/_dash-update-component"
# the chat page's two callbacks that write: one saves a new session, one starts a job
LOAD_SESSION = {
    "output": "..chat-session.data...chat-history.children...chat-examples.style"
    "...chat-data.options..",
    "outputs": [
        {"id": "chat-session", "property": "data"},
        {"id": "chat-history", "property": "children"},
        {"id": "chat-examples", "property": "style"},
        {"id": "chat-data", "property": "options"},
    ],
    "inputs": [
        {"id": "chat-session", "property": "data", "value": None},
        {"id": "chat-done", "property": "data", "value": None},
    ],
    "state": [],
    "changedPropIds": [],
}
SEND = {
    "output": "..chat-job.data...chat-tick.disabled...chat-prompt.value..",
    "outputs": [
        {"id": "chat-job", "property": "data"},
        {"id": "chat-tick", "property": "disabled"},
        {"id": "chat-prompt", "property": "value"},
    ],
    "inputs": [{"id": "chat-send", "property": "n_clicks", "value": 1}],
    "state": [
        {"id": "chat-prompt", "property": "value", "value": "show the runs"},
        {"id": "chat-session", "property": "data", "value": None},
    ],
    "changedPropIds": ["chat-send.n_clicks"],
}


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
        _stop(proc)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The default dashboard (127.0.0.1, no credentials), with two allowed names."""
    home = tmp_path_factory.mktemp("dash-local") / "home"
    port = free_port()
    env = _env(
        home, MLPILOT_DASH_USER="", MLPILOT_DASH_PASSWORD="", MLPILOT_DASH_ALLOWED_HOSTS=ALLOWED
    )
    proc = subprocess.Popen(
        [MLPILOT, "dashboard", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, timeout=60)
        yield f"http://127.0.0.1:{port}", home
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    # on a loaded machine the interpreter's exit after a chat job can pass 10 s: the test is
    # not about shutting down, so it does not wait forever
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _request(
    url: str,
    *,
    auth: tuple[str, str] | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
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


def _token(url: str, auth: tuple[str, str] | None = None) -> str:
    """The CSRF token the page's first response hands a browser, as its cookie."""
    status, headers, _ = _request(url + "/", auth=auth)
    assert status == 200
    cookies = [c for c in headers.get_all("Set-Cookie") or [] if c.startswith("_csrf_token=")]
    assert len(cookies) == 1, headers.get_all("Set-Cookie")
    value, *attributes = (part.strip() for part in cookies[0].split(";"))
    assert "SameSite=Strict" in attributes and "Path=/" in attributes, attributes
    assert "HttpOnly" not in attributes  # dash-renderer reads it from document.cookie
    return value.removeprefix("_csrf_token=")


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
    status, _, answer = _request(url + CALLBACK, body=json.dumps(body).encode(), headers=headers)
    return status, answer


def _stores(home: Path) -> tuple[int, int]:
    """Sessions and runs in the dashboard's metadata store."""
    from mlpilot.platform.config import Settings
    from mlpilot.tracking.metadata import connect

    store = connect(Settings.from_env({"MLPILOT_HOME": str(home)}))
    try:
        return len(store.list_sessions(limit=1000)), store.count_runs()
    finally:
        store.close()


def _same_site(url: str, token: str) -> dict[str, str]:
    """What dash-renderer sends on a callback: its origin, the cookie, the token header."""
    return {"Origin": url, "Cookie": f"_csrf_token={token}", "X-CSRFToken": token}


@pytest.mark.parametrize(
    "host",
    [
        "rebound.attacker.example",  # DNS rebinding: the socket is 127.0.0.1, the name is theirs
        "rebound.attacker.example:{port}",
        "127.0.0.1.attacker.example:{port}",
        "localhost.attacker.example",
        "example.org",  # the parent of an allowed name
        "corp.example.evil",
        "0.0.0.0:{port}",
        "[::2]:{port}",
    ],
)
def test_a_forged_host_is_refused_before_dash_runs(local: tuple[str, Path], host: str) -> None:
    url, home = local
    host = host.format(port=url.rsplit(":", 1)[1])
    before = _stores(home)
    token = _token(url)
    for path, body in (("/", None), ("/_dash-layout", None), (CALLBACK, LOAD_SESSION)):
        headers = {**_same_site(url, token), "Host": host, "Origin": f"http://{host}"}
        data = json.dumps(body).encode() if body else None
        status, answer_headers, answer = _request(url + path, body=data, headers=headers)
        assert status == 403, (path, status, answer[:200])
        assert answer.decode().count("\n") == 1 and "does not answer to" in answer.decode()
        assert answer_headers.get("Content-Type", "").startswith("text/plain")
        assert answer_headers.get_all("Set-Cookie") is None  # no token for a foreign name
    assert _stores(home) == before


@pytest.mark.parametrize("host", ["", "a b", "localhost:99999", "[::1", "evil.example@localhost"])
def test_a_malformed_host_gets_400(local: tuple[str, Path], host: str) -> None:
    url, _ = local
    status, _, answer = _request(url + "/", headers={"Host": host})
    assert status == 400 and answer == b"bad Host header\n"


@pytest.mark.parametrize(
    "host",
    ["localhost", "127.0.0.1", "[::1]", "dash.example.org", "corp.example", "a.corp.example"],
)
def test_allowed_hosts_are_answered(local: tuple[str, Path], host: str) -> None:
    url, _ = local
    port = url.rsplit(":", 1)[1]
    for name in (host, f"{host}:{port}", host.upper()):
        status, _, _ = _request(url + "/_dash-layout", headers={"Host": name})
        assert status == 200, name


def test_a_cross_site_post_is_refused_and_writes_nothing(local: tuple[str, Path]) -> None:
    url, home = local
    token = _token(url)
    port = url.rsplit(":", 1)[1]
    before = _stores(home)
    cross_site = [
        {"Origin": "http://attacker.example"},
        {"Origin": f"http://localhost:{int(port) + 1}"},  # another local port: another site
        {"Origin": f"{url}.attacker.example"},
        {"Origin": "null"},  # sandboxed frames and file: pages
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Referer": "http://attacker.example/page"},
    ]
    for extra in cross_site:
        headers = {"Cookie": f"_csrf_token={token}", "X-CSRFToken": token, **extra}
        for body in (LOAD_SESSION, SEND):
            status, answer = _post(url, body, headers)
            assert status == 403, (extra, status, answer[:200])
            assert answer == b"refused: the request came from another site\n"
    assert _stores(home) == before
    # the same call from the dashboard's own page is answered, and saves a session
    status, answer = _post(url, LOAD_SESSION, _same_site(url, token))
    assert status == 200, answer[:300]
    assert _stores(home)[0] == before[0] + 1


def test_a_post_without_the_right_token_starts_nothing(local: tuple[str, Path]) -> None:
    from mlpilot.dashboards.security import Gate, HostList

    url, home = local
    token, other = _token(url), _token(url)
    assert token != other  # one per browser session
    nonce, _, mac = token.partition(".")
    foreign = Gate(HostList(set()), b"k" * 32, None).new_token()  # signed with another key
    before = _stores(home)
    wrong = [
        {"Origin": url},  # neither
        {"Origin": url, "Cookie": f"_csrf_token={token}"},  # the cookie alone
        {"Origin": url, "X-CSRFToken": token},  # the header alone
        {"Origin": url, "Cookie": f"_csrf_token={token}", "X-CSRFToken": other},  # two tokens
        _same_site(url, f"{nonce}.{mac[:-1]}{'B' if mac.endswith('A') else 'A'}"),  # forged
        _same_site(url, f"x{nonce}.{mac}"),
        _same_site(url, foreign),
        _same_site(url, nonce),
    ]
    for headers in wrong:
        status, answer = _post(url, SEND, headers)
        assert status == 403, (headers, status, answer[:200])
        assert answer == b"refused: CSRF token missing or wrong (reload the page)\n"
    assert _stores(home) == before  # no session made, no run started
    # with the right token the same post starts a chat job
    status, answer = _post(url, SEND, _same_site(url, token))
    assert status == 200, answer[:300]
    job = json.loads(answer)["response"]["chat-job"]["data"]
    assert isinstance(job, str) and len(job) == 12


def test_tokens_are_signed_with_an_owner_only_key(local: tuple[str, Path], tmp_path: Path) -> None:
    from mlpilot.dashboards.security import signing_key
    from mlpilot.platform.config import Settings
    from mlpilot.platform.errors import SettingsError

    _, home = local
    key = home / "private" / "dashboard.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert signing_key(Settings.from_env({"MLPILOT_HOME": str(home)})) == key.read_bytes()

    other = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")})
    planted = other.private_dir / "dashboard.key"
    planted.parent.mkdir(parents=True)
    (tmp_path / "known").write_bytes(b"k" * 32)
    planted.symlink_to(tmp_path / "known")  # a key someone else knows
    with pytest.raises(SettingsError, match="is a symbolic link"):
        signing_key(other)
    planted.unlink()
    planted.write_bytes(b"k" * 32)
    planted.chmod(0o644)
    with pytest.raises(SettingsError, match="only its owner"):
        signing_key(other)


def test_with_credentials_a_token_is_issued_only_after_them(server: str) -> None:
    status, headers, _ = _request(server + "/")
    assert status == 401 and headers.get_all("Set-Cookie") is None
    token = _token(server, auth=(USER, PASSWORD))
    body = json.dumps(LOAD_SESSION).encode()
    status, _, _ = _request(server + CALLBACK, body=body, headers=_same_site(server, token))
    assert status == 401  # the token is no credential
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    headers = {**_same_site(server, token), "Authorization": f"Basic {auth}"}
    status, _, answer = _request(server + CALLBACK, body=body, headers=headers)
    assert status == 200, answer[:300]
    status, _, _ = _request(
        server + CALLBACK, body=body, headers={**headers, "Host": "evil.example"}
    )
    assert status == 403


@pytest.mark.parametrize(
    ("bind", "host", "answered"),
    [
        ("10.1.2.3", "10.1.2.3", True),  # the bound address joins the list
        ("10.1.2.3", "10.1.2.4", False),
        ("::1", "[::1]", True),
        ("fd00::5", "[fd00::5]", True),
        ("[fe80::0001]", "[fe80::1]", True),
        ("Dash.Local", "dash.local", True),
        ("0.0.0.0", "0.0.0.0", False),  # a wildcard names nothing a browser should use
        ("::", "[::]", False),
        ("0.0.0.0", "localhost", True),
        ("0.0.0.0", "x.corp.example", True),
    ],
)
def test_the_bound_address_joins_the_allowed_hosts(
    bind: str, host: str, answered: bool, tmp_path: Path
) -> None:
    from mlpilot.dashboards.security import allowed_hosts
    from mlpilot.platform.config import Settings

    settings = Settings.from_env(
        {"MLPILOT_HOME": str(tmp_path), "MLPILOT_DASH_ALLOWED_HOSTS": ".corp.example"}
    )
    assert allowed_hosts(settings, bind).allows(host) is answered


@pytest.mark.parametrize(
    "value", ["http://dash.example.org", "dash.example.org:8050", "a b", "[::g]"]
)
def test_a_bad_allowed_hosts_setting_is_one_line(tmp_path: Path, value: str) -> None:
    env = {"MLPILOT_HOME": str(tmp_path / "home"), "MLPILOT_DASH_ALLOWED_HOSTS": value}
    done = run_cli("dashboard", "--port", str(free_port()), env=env, timeout=60)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "MLPILOT_DASH_ALLOWED_HOSTS" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


CHROMIUM = os.environ.get("MLPILOT_CHROMIUM", "/usr/bin/chromium")
# the attacker's page: it posts a callback to its own origin and shows what came back
ATTACK_PAGE = """<!doctype html><html><body><p id="status">waiting</p><script>
fetch("__TARGET__", {method: "POST", headers: {"Content-Type": "application/json"},
                     body: JSON.stringify(__BODY__)})
  .then(r => r.text().then(t => { document.getElementById("status").textContent = r.status + " " + t; }))
  .catch(e => { document.getElementById("status").textContent = "blocked " + e; });
</script></body></html>"""
FORM_PAGE = """<!doctype html><html><body>
<form id="f" method="post" action="__TARGET__" enctype="text/plain">
<input name='{"output":"..chat-session.data...chat-history.children..","x":"' value='"}'></form>
<script>document.getElementById("f").submit();</script></body></html>"""


@pytest.mark.browser
@pytest.mark.slow
def test_in_chromium_a_rebound_name_and_a_cross_site_form_write_nothing(
    local: tuple[str, Path],
    playwright: Any,
) -> None:
    """DNS rebinding and a cross-site form, played out in Chromium: the attacker's names
    resolve to 127.0.0.1 (``--host-resolver-rules``), their pages are served by the test."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)")
    url, home = local
    port = url.rsplit(":", 1)[1]
    rebound = f"http://rebound.attacker.example:{port}"
    pages = {
        f"{rebound}/attack": ATTACK_PAGE.replace("__TARGET__", CALLBACK).replace(
            "__BODY__", json.dumps(LOAD_SESSION)
        ),
        f"http://attacker.example:{port}/form": FORM_PAGE.replace("__TARGET__", url + CALLBACK),
    }
    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    args += [
        "--host-resolver-rules=MAP rebound.attacker.example 127.0.0.1, MAP attacker.example 127.0.0.1",
        # Chromium's own guard of local addresses (other browsers have none): the
        # dashboard's checks are what this test measures
        "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,"
        "PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults",
    ]
    before = _stores(home)
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
    try:
        page = browser.new_page()
        page.set_default_timeout(30_000)
        page.goto(url + "/chat")  # the victim has the dashboard open: a token cookie
        page.wait_for_selector("#chat-session-id")
        assert _stores(home)[0] == before[0] + 1  # the page's own callbacks work
        page.route(
            lambda u: u in pages,
            lambda route: route.fulfill(
                status=200, content_type="text/html", body=pages[route.request.url]
            ),
        )
        # after the rebind, the attacker's page and the dashboard share an origin
        page.goto(f"{rebound}/attack")
        page.locator("#status", has_text=re.compile(r"^\d")).wait_for()
        assert page.inner_text("#status").startswith("403 this dashboard does not answer")
        response = page.goto(rebound + "/")
        assert response is not None and response.status == 403
        # a form on another site posts to the dashboard itself
        with page.expect_navigation(url=url + CALLBACK):
            page.goto(f"http://attacker.example:{port}/form")
        assert "refused: the request came from another site" in page.content()
    finally:
        browser.close()
    assert _stores(home)[0] == before[0] + 1  # nothing the attacker sent saved a session


def test_over_https_the_token_cookie_is_secure(tmp_path: Path) -> None:
    from mlpilot.dashboards import queries
    from mlpilot.dashboards.app import create_app
    from mlpilot.platform.config import Settings

    settings = Settings.from_env({"MLPILOT_HOME": str(tmp_path / "home")})
    try:
        client = create_app(settings).server.test_client(use_cookies=False)
        for base, secure in (("https://localhost", True), ("http://localhost", False)):
            response = client.get("/", base_url=base)
            cookie = response.headers["Set-Cookie"]
            assert cookie.startswith("_csrf_token=") and "SameSite=Strict" in cookie
            assert ("Secure" in cookie.split("; ")) is secure, cookie
    finally:
        queries.configure(None)
