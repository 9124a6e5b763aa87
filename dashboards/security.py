"""What stands between the dashboard and the network (DESIGN §8, issue 14).

- **Host first.** Every request's ``Host`` must name this machine (127.0.0.1, localhost,
  [::1]), the bound address or a name of ``MLPILOT_DASH_ALLOWED_HOSTS``: a page whose own
  domain was rebound to 127.0.0.1 (DNS rebinding) is refused before Dash sees anything.
- **Credentials next.** With ``MLPILOT_DASH_USER``/``MLPILOT_DASH_PASSWORD`` set, every
  request is checked before Flask or Dash reads its body: a malformed callback gets 401,
  never a 500 from a parser that ran before the check.
- **Same origin, with a token.** A POST (every Dash callback: loading a session, an upload,
  a chat job, a cancel) must come from the dashboard's own origin (``Origin``, else
  ``Sec-Fetch-Site``, else ``Referer``) and carry ``X-CSRFToken`` equal to the
  ``_csrf_token`` cookie, which the server signed (HMAC, key in ``private/``). dash-renderer
  copies that cookie into that header on every request it makes.
- **Headers.** A content security policy that allows only the dashboard's own scripts (and
  the hashes of Dash's two inline ones), no framing, no MIME sniffing, no referrer.
- **One process.** Served by waitress with threads: chat jobs and their progress live in
  this process, so it must be one process, and never Flask's development server.
- **Binding.** A non-local address without credentials is refused, not warned about.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mlpilot.platform.config import Settings
from mlpilot.platform.config.settings import HOST_NAME
from mlpilot.platform.errors import SettingsError

logger = logging.getLogger(__name__)

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: waitress's worker threads: chat jobs run on threads of their own, these only answer requests
THREADS = 8
REALM = 'Basic realm="mlpilot", charset="UTF-8"'
#: addresses that bind every interface: no Host header names them
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: dash-renderer's defaults (getCSRFHeader in dash_renderer.js): it reads this cookie and
#: sends its value in this header on every request, callbacks included
CSRF_COOKIE = "_csrf_token"
CSRF_HEADER = "X-CSRFToken"
KEY_FILE = "dashboard.key"
KEY_BYTES = 32


def check_bind(host: str, settings: Settings) -> None:
    """Refuse to expose the dashboard beyond this machine without credentials."""
    if host in LOCAL_HOSTS or (settings.dash_user and settings.dash_password):
        return
    raise SettingsError(
        f"refusing to serve the dashboard on {host} without credentials: anyone who reaches "
        "the port could read every run and start new ones",
        hint="set MLPILOT_DASH_USER and MLPILOT_DASH_PASSWORD, or serve on 127.0.0.1",
    )


def protect(app: Any, settings: Settings, bind: str = "127.0.0.1") -> None:
    """The gate (Host, credentials, origin, CSRF token) before any other request hook, and
    the security headers and the token cookie on every response."""
    server = app.server
    credentials = None
    if settings.dash_user and settings.dash_password:
        credentials = (settings.dash_user, settings.dash_password)
    gate = Gate(allowed_hosts(settings, bind), signing_key(settings), credentials)
    # first in line: before Dash's own hooks, and before any body is read
    server.before_request_funcs.setdefault(None, []).insert(0, gate.check)
    policy: list[str] = []

    def add_headers(response: Any) -> Any:
        # computed at the first response: Dash registers the pages' inline clientside
        # script while setting up its server, on the first request
        if not policy:
            policy.append(content_security_policy(app))
        return gate.issue_token(_add_headers(response, policy[0]))

    server.after_request(add_headers)


class HostList:
    """Names a Host header may carry: exact ones, and ``.domain`` for a domain and below."""

    def __init__(self, names: set[str]) -> None:
        self.exact = frozenset(n for n in names if not n.startswith("."))
        self.domains = tuple(n for n in names if n.startswith("."))

    def allows(self, host: str) -> bool:
        if host in self.exact:
            return True
        return any(host == d[1:] or host.endswith(d) for d in self.domains)


def allowed_hosts(settings: Settings, bind: str) -> HostList:
    """127.0.0.1, localhost and [::1], the bound address, and MLPILOT_DASH_ALLOWED_HOSTS."""
    names = {"127.0.0.1", "localhost", "[::1]", *settings.dash_allowed_hosts}
    bound = bind.strip().lower().removeprefix("[").removesuffix("]")
    if bound in WILDCARD_BINDS:
        # a wildcard is no name a browser sends: the owner lists the names people use
        if not settings.dash_allowed_hosts:
            logger.warning(
                "the dashboard listens on %s but answers only requests for 127.0.0.1, "
                "localhost and [::1]: list the names it is reached by in "
                "MLPILOT_DASH_ALLOWED_HOSTS",
                bind,
            )
    else:
        names.add(_host_name(f"[{bound}]" if ":" in bound else bound) or bound)
    return HostList(names)


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header (port dropped, IPv6 compressed in brackets), or None
    when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        inside, sep, rest = value[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and _port_ok(rest[1:]))):
            return None
        try:
            return f"[{ipaddress.IPv6Address(inside).compressed}]"
        except ValueError:
            return None
    name, _, port = value.partition(":")
    if port and not _port_ok(port):
        return None
    if not name or len(name) > 253 or not HOST_NAME.match(name):
        return None
    return name


def _port_ok(port: str) -> bool:
    return port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) <= 65535


def same_origin(headers: Any, host: str) -> bool:
    """A request a browser sent from the dashboard's own pages (or one no browser sent)."""
    origin = headers.get("Origin")
    if origin is not None:
        return _netloc(origin) == host.lower()
    # a browser that sends no Origin still says where the request came from
    if headers.get("Sec-Fetch-Site", "").strip().lower() in ("cross-site", "same-site"):
        return False
    referer = headers.get("Referer")
    if referer:
        return _netloc(referer) == host.lower()
    return True  # not a browser's: the token still decides


def _netloc(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or "@" in parts.netloc:
        return None  # "null" (sandboxed frames, file: pages) included
    return parts.netloc.lower()


class Gate:
    """Every request, in order: its Host, the credentials, and for anything but GET, HEAD
    and OPTIONS the origin and the CSRF token. Each refusal is one plain-text line."""

    def __init__(self, hosts: HostList, key: bytes, credentials: tuple[str, str] | None) -> None:
        self.hosts = hosts
        self.key = key
        self.credentials = credentials

    @property
    def user(self) -> str:
        return self.credentials[0] if self.credentials else ""

    def check(self) -> Any:
        import flask

        request = flask.request
        header = request.environ.get("HTTP_HOST", "")
        host = _host_name(header)
        if host is None:
            return _refuse(400, "bad Host header")
        if not self.hosts.allows(host):
            logger.info("refused a request for host %r", header[:100])
            return _refuse(
                403,
                f"this dashboard does not answer to {host[:100]!r} "
                "(MLPILOT_DASH_ALLOWED_HOSTS lists the names it does)",
            )
        if self.credentials and not _credentials_match(*self.credentials):
            return flask.Response(
                "credentials required\n",
                401,
                {"WWW-Authenticate": REALM, "Content-Type": "text/plain"},
            )
        flask.g.mlpilot_trusted = True  # a token may be issued to this client
        if request.method in SAFE_METHODS:
            return None
        if not same_origin(request.headers, header):
            logger.info("refused a %s from another origin", request.method)
            return _refuse(403, "refused: the request came from another site")
        sent = request.headers.get(CSRF_HEADER, "")
        if not (
            hmac.compare_digest(_ascii(sent), _ascii(request.cookies.get(CSRF_COOKIE, "")))
            and self.valid(sent)
        ):
            return _refuse(403, "refused: CSRF token missing or wrong (reload the page)")
        return None

    def issue_token(self, response: Any) -> Any:
        """A signed token in a cookie dash-renderer can read, for a client that passed the
        gate and holds no valid one yet."""
        import flask

        if not flask.g.get("mlpilot_trusted") or self.valid(
            flask.request.cookies.get(CSRF_COOKIE, "")
        ):
            return response
        response.set_cookie(
            CSRF_COOKIE,
            self.new_token(),
            path="/",
            samesite="Strict",
            secure=flask.request.is_secure,
            httponly=False,  # dash-renderer reads it from document.cookie
        )
        return response

    def new_token(self) -> str:
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._mac(nonce)}"

    def valid(self, token: str) -> bool:
        if not token or len(token) > 200 or not token.isascii():
            return False
        nonce, sep, mac = token.partition(".")
        return bool(sep and nonce) and hmac.compare_digest(mac.encode(), self._mac(nonce).encode())

    def _mac(self, nonce: str) -> str:
        # bound to the user: a token issued under other credentials is no token here
        message = b"\0".join([b"mlpilot-dashboard-csrf", self.user.encode(), nonce.encode()])
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _ascii(value: str) -> bytes:
    return value.encode("ascii", "replace")


def _refuse(status: int, line: str) -> Any:
    import flask

    return flask.Response(line + "\n", status, {"Content-Type": "text/plain; charset=utf-8"})


def signing_key(settings: Settings) -> bytes:
    """The key that signs CSRF tokens: ``private/dashboard.key``, owner-only, made once."""
    from mlpilot.tracking.metadata import private_dir

    path = private_dir(settings) / KEY_FILE
    if not path.exists():
        _write_key(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise _bad_key(path, why) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise _bad_key(path, "it is not a file only its owner may read")
        key = handle.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise _bad_key(path, f"it does not hold {KEY_BYTES} bytes")
    return key


def _write_key(path: Path) -> None:
    # written whole under another name, then linked in: a second dashboard starting at the
    # same moment reads one complete key, never half of one
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
        os.link(temporary, path)
    except FileExistsError:
        pass
    finally:
        temporary.unlink(missing_ok=True)


def _bad_key(path: Path, why: str) -> SettingsError:
    return SettingsError(
        f"the dashboard's key {path} is refused: {why}",
        hint="remove it; the dashboard makes a new one (open pages then reload)",
    )


def _credentials_match(user: str, password: str) -> bool:
    import flask

    given = _basic_credentials(flask.request.headers.get("Authorization", ""))
    if given is None:
        return False
    same_user = hmac.compare_digest(given[0].encode(), user.encode())
    same_password = hmac.compare_digest(given[1].encode(), password.encode())
    return same_user and same_password


def _basic_credentials(header: str) -> tuple[str, str] | None:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def content_security_policy(app: Any) -> str:
    """Scripts from this server only, plus Dash's inline renderer scripts by hash; inline
    styles are allowed because Plotly writes its own ``<style>`` elements."""
    hashes = " ".join(app.csp_hashes())  # each already quoted: 'sha256-…'
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' {hashes}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def _add_headers(response: Any, policy: str) -> Any:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", policy)
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    return response


def serve_wsgi(app: Any, host: str, port: int) -> None:
    """waitress, one process, ``THREADS`` threads."""
    from waitress import serve

    logger.info("serving the dashboard with waitress on %s:%s (%d threads)", host, port, THREADS)
    serve(app.server, host=host, port=port, threads=THREADS, ident="mlpilot")
