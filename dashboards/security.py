"""What stands between the dashboard and the network (DESIGN §8, issue 14).

- **Credentials first.** With ``MLPILOT_DASH_USER``/``MLPILOT_DASH_PASSWORD`` set, every
  request is checked before Flask or Dash reads its body: a malformed callback gets 401,
  never a 500 from a parser that ran before the check.
- **Headers.** A content security policy that allows only the dashboard's own scripts (and
  the hashes of Dash's two inline ones), no framing, no MIME sniffing, no referrer.
- **One process.** Served by waitress with threads: chat jobs and their progress live in
  this process, so it must be one process, and never Flask's development server.
- **Binding.** A non-local address without credentials is refused, not warned about.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
from typing import Any

from mlpilot.platform.config import Settings
from mlpilot.platform.errors import SettingsError

logger = logging.getLogger(__name__)

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
#: waitress's worker threads: chat jobs run on threads of their own, these only answer requests
THREADS = 8
REALM = 'Basic realm="mlpilot", charset="UTF-8"'


def check_bind(host: str, settings: Settings) -> None:
    """Refuse to expose the dashboard beyond this machine without credentials."""
    if host in LOCAL_HOSTS or (settings.dash_user and settings.dash_password):
        return
    raise SettingsError(
        f"refusing to serve the dashboard on {host} without credentials: anyone who reaches "
        "the port could read every run and start new ones",
        hint="set MLPILOT_DASH_USER and MLPILOT_DASH_PASSWORD, or serve on 127.0.0.1",
    )


def protect(app: Any, settings: Settings) -> None:
    """Credentials (when configured) and security headers on every response."""
    server = app.server
    if settings.dash_user and settings.dash_password:
        user, password = settings.dash_user, settings.dash_password
        # first in line: before any other before_request hook, and before any body is read
        server.before_request_funcs.setdefault(None, []).insert(
            0, lambda: _require_credentials(user, password)
        )
    policy: list[str] = []

    def add_headers(response: Any) -> Any:
        # computed at the first response: Dash registers the pages' inline clientside
        # script while setting up its server, on the first request
        if not policy:
            policy.append(content_security_policy(app))
        return _add_headers(response, policy[0])

    server.after_request(add_headers)


def _require_credentials(user: str, password: str) -> Any:
    import flask

    given = _basic_credentials(flask.request.headers.get("Authorization", ""))
    if given is not None:
        same_user = hmac.compare_digest(given[0].encode(), user.encode())
        same_password = hmac.compare_digest(given[1].encode(), password.encode())
        if same_user and same_password:
            return None
    return flask.Response(
        "credentials required\n", 401, {"WWW-Authenticate": REALM, "Content-Type": "text/plain"}
    )


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
